#include "kjit/runtime.hpp"

#include <array>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cuda_driver.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "kjit/record.hpp"
#include "loaded_kernel.hpp"
#include "param_sizes.hpp"

namespace kjit {
namespace {

int device_from_env() {
  const char* s = std::getenv("KJIT_DEVICE");
  if (!s || !*s) return 0;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > 1024)
    throw Error(Errc::InvalidArgument,
                std::string("KJIT_DEVICE='") + s + "' is not a device ordinal (a number >= 0)");
  return static_cast<int>(v);
}

int attr(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  KJIT_CU(cuDeviceGetAttribute, &v, a, dev);
  return v;
}

DeviceProps query_props(int ordinal, CUdevice dev) {
  DeviceProps p;
  p.ordinal = ordinal;
  char name[256] = {};
  KJIT_CU(cuDeviceGetName, name, static_cast<int>(sizeof(name) - 1), dev);
  p.name = name;
  p.cc_major = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p.cc_minor = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p.sm_count = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p.max_threads_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p.max_smem_per_block_optin = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p.max_smem_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p.l2_bytes = attr(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  p.cluster_launch = attr(dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
  p.driver_version = detail::driver().version;
  return p;
}

// The SMs the current context may use: an MPS client limited by execution affinity gets fewer
// than the device has, and the driver refuses cooperative grids sized for all of them. Drivers
// or setups without the query (not MPS) mean no limit.
int context_sm_count(int device_sms) {
  PFN_cuCtxGetExecAffinity_v11040 get = nullptr;
  try {
    get = KJIT_DRIVER_PROC(cuCtxGetExecAffinity, 11040);
  } catch (const Error&) {
    return device_sms;
  }
  CUexecAffinityParam a{};
  if (get(&a, CU_EXEC_AFFINITY_TYPE_SM_COUNT) != CUDA_SUCCESS) return device_sms;
  const int n = static_cast<int>(a.param.smCount.val);
  return n > 0 && n < device_sms ? n : device_sms;
}

// One slot per specialization: the first caller compiles and loads under the slot's mutex while
// others asking for the same one wait; different specializations proceed in parallel.
struct Slot {
  std::mutex mu;
  std::atomic<bool> ready{false};
  detail::LoadedKernel kernel;
};

}  // namespace

struct Runtime::Impl {
  int ordinal = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  DeviceProps props;
  std::string arch;
  std::unique_ptr<Compiler> compiler;
  mutable std::shared_mutex table_mu;
  std::unordered_map<std::string, std::unique_ptr<Slot>> table;
  std::atomic<uint64_t> loaded{0};
  // Extensions (Runtime::extension): the first kFastExtensions ids are found with one atomic
  // load; `extensions` owns them all in the order they were made, for destruction newest first.
  static constexpr size_t kFastExtensions = 256;
  std::array<std::atomic<void*>, kFastExtensions> fast_extensions{};
  mutable std::recursive_mutex extension_mu;  // an extension's constructor may make another
  std::vector<std::pair<size_t, std::shared_ptr<void>>> extensions;
  bool destroying = false;  // guarded by extension_mu
  // Newest first. An extension's destructor may still use an older one (made before it, so
  // still here) but not a newer one: its slot is cleared before it goes, so the lookup misses,
  // and making one now throws.
  void destroy_extensions() {
    std::lock_guard<std::recursive_mutex> lock(extension_mu);
    destroying = true;
    while (!extensions.empty()) {
      const size_t id = extensions.back().first;
      if (id < kFastExtensions) fast_extensions[id].store(nullptr, std::memory_order_release);
      std::shared_ptr<void> last = std::move(extensions.back().second);
      extensions.pop_back();
      last.reset();
    }
  }

  // header -> its closure's generation, as of templates().generation() == at: recomputed (the
  // closure's includes parsed) only after an add(), not on every Runtime::kernel call.
  struct ClosureGen {
    uint64_t at, gen;
  };
  mutable std::shared_mutex gen_mu;
  std::unordered_map<std::string, ClosureGen> closure_gens;

  Slot& slot(const std::string& key);
  void load(Slot& s, const Spec& spec);
  uint64_t closure_generation(const std::string& header);
};

uint64_t Runtime::Impl::closure_generation(const std::string& header) {
  const TemplateSet& t = compiler->templates();
  const uint64_t now = t.generation();
  {
    std::shared_lock lock(gen_mu);
    auto it = closure_gens.find(header);
    if (it != closure_gens.end() && it->second.at == now) return it->second.gen;
  }
  const uint64_t gen = t.closure_generation(header);  // NotFound for an unknown header
  std::unique_lock lock(gen_mu);
  closure_gens[header] = ClosureGen{now, gen};
  return gen;
}

Slot& Runtime::Impl::slot(const std::string& key) {
  {
    std::shared_lock lock(table_mu);
    auto it = table.find(key);
    if (it != table.end()) return *it->second;
  }
  std::unique_lock lock(table_mu);
  auto& p = table[key];
  if (!p) p = std::make_unique<Slot>();
  return *p;
}

void Runtime::Impl::load(Slot& s, const Spec& spec) {
  CompiledKernel ck = compiler->get(spec, arch);
  detail::ContextGuard guard(ctx);
  const detail::Driver& d = detail::driver();
  detail::LoadedKernel& k = s.kernel;
  k.ctx = ctx;
  k.sm_count = props.context_sm_count;
  k.instantiation = ck.instantiation;
  k.lowered_name = ck.lowered_name;
  CUresult r = d.cuModuleLoadData_fn(&k.module, ck.binary.data());
  if (r != CUDA_SUCCESS)
    throw Error(Errc::Cuda, "cuModuleLoadData failed for " + ck.instantiation + " (" + ck.arch +
                                "): " + detail::cu_error_text(r));
  r = d.cuModuleGetFunction_fn(&k.fn, k.module, ck.lowered_name.c_str());
  if (r != CUDA_SUCCESS) {
    d.cuModuleUnload_fn(k.module);
    k.module = nullptr;
    throw Error(Errc::Cuda, "cuModuleGetFunction(" + ck.lowered_name + ") failed for " +
                                ck.instantiation + ": " + detail::cu_error_text(r));
  }
  int max_dynamic_smem = 0;  // the driver's default: 48 KB less the static shared memory
  const std::pair<CUfunction_attribute, int*> attrs[] = {
      {CU_FUNC_ATTRIBUTE_NUM_REGS, &k.num_regs},
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &k.max_threads},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &k.static_smem},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &max_dynamic_smem}};
  for (const auto& [attr, out] : attrs) {
    r = d.cuFuncGetAttribute_fn(out, attr, k.fn);
    if (r != CUDA_SUCCESS) {
      d.cuModuleUnload_fn(k.module);
      k.module = nullptr;
      k.fn = nullptr;
      throw Error(Errc::Cuda, "cuFuncGetAttribute(" + std::to_string(static_cast<int>(attr)) +
                                  ") failed for " + ck.instantiation + ": " +
                                  detail::cu_error_text(r));
    }
  }
  k.smem_limit.store(static_cast<unsigned>(max_dynamic_smem), std::memory_order_release);
  if (auto sizes = detail::read_param_sizes(k.fn, detail::driver_param_count_fn(),
                                            detail::driver_param_info_fn())) {
    k.param_sizes = std::move(*sizes);
    k.params_known = true;
  }
  loaded.fetch_add(1, std::memory_order_relaxed);
}

Runtime::Runtime(RuntimeOptions opts) : impl_(std::make_unique<Impl>()) {
  // Before the context is retained: a throwing constructor runs no destructor to release it.
  std::shared_ptr<Recorder> recorder;
  if (!opts.record.empty()) recorder = std::make_shared<Recorder>(opts.record);
  detail::driver();  // throws NoDriver/NoDevice with the reason
  int ordinal = opts.device >= 0 ? opts.device : device_from_env();
  int count = 0;
  KJIT_CU(cuDeviceGetCount, &count);
  if (count == 0) throw Error(Errc::NoDevice, "the CUDA driver reports no device");
  if (ordinal >= count)
    throw Error(Errc::NoDevice, "device " + std::to_string(ordinal) + " requested but only " +
                                    std::to_string(count) + " device(s) present (KJIT_DEVICE)");
  impl_->ordinal = ordinal;
  KJIT_CU(cuDeviceGet, &impl_->dev, ordinal);
  impl_->props = query_props(ordinal, impl_->dev);
  impl_->arch = Compiler::arch_for_cc(impl_->props.cc());
  // The primary context is the one the CUDA runtime (and so PyTorch) uses: sharing it means
  // kjit's modules and the app's streams and buffers live in one context.
  KJIT_CU(cuDevicePrimaryCtxRetain, &impl_->ctx, impl_->dev);
  {
    detail::ContextGuard guard(impl_->ctx);
    impl_->props.context_sm_count = context_sm_count(impl_->props.sm_count);
  }
  impl_->compiler = std::make_unique<Compiler>(std::move(opts.cache));
  impl_->compiler->set_recorder(std::move(recorder));
}

std::string RuntimeOptions::record_from_env() {
  const char* s = std::getenv("KJIT_RECORD");
  return s ? std::string(s) : std::string();
}

Runtime::~Runtime() {
  if (!impl_ || !impl_->ctx) return;
  const detail::Driver& d = detail::driver();
  {
    detail::ContextGuard guard(impl_->ctx, std::nothrow);
    // Kernels and workspaces may still be in use by queued work: unloading a module or freeing a
    // buffer under a running kernel is undefined. Errors (a sticky fault) change nothing here.
    d.cuCtxSynchronize_fn();
    impl_->destroy_extensions();
    for (auto& kv : impl_->table)
      if (kv.second->kernel.module) d.cuModuleUnload_fn(kv.second->kernel.module);
  }
  d.cuDevicePrimaryCtxRelease_fn(impl_->dev);
}

const DeviceProps& Runtime::props() const {
  return impl_->props;
}
const std::string& Runtime::arch() const {
  return impl_->arch;
}
CUcontext Runtime::context() const {
  return impl_->ctx;
}
Compiler& Runtime::compiler() {
  return *impl_->compiler;
}

Kernel Runtime::kernel(const Spec& spec, CUstream capture_stream) {
  // The generation of the spec's header closure: a header of it replaced through
  // templates().add() since a kernel was loaded makes a new slot, loaded from the new text; an
  // unrelated header added meanwhile keeps the loaded kernel (a capture may still ask for it).
  std::string key = std::to_string(impl_->closure_generation(spec.header()));
  key += '\n';
  key += spec.header();
  key += '\n';
  key += spec.instantiation();
  Slot& s = impl_->slot(key);
  if (s.ready.load(std::memory_order_acquire)) return Kernel(&s.kernel);
  if (detail::capturing(impl_->ctx, capture_stream))
    throw Error(Errc::CaptureCompile,
                spec.instantiation() +
                    " is not loaded yet and the stream is being captured into a graph: run or "
                    "prepare the op once before capturing");
  std::lock_guard lock(s.mu);
  if (!s.ready.load(std::memory_order_acquire)) {
    impl_->load(s, spec);
    s.ready.store(true, std::memory_order_release);
  }
  return Kernel(&s.kernel);
}

RuntimeStats Runtime::stats() const {
  RuntimeStats st;
  st.kernels_loaded = impl_->loaded.load(std::memory_order_relaxed);
  st.compiler = impl_->compiler->stats();
  return st;
}

size_t detail::new_extension_id() {
  static std::atomic<size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void* Runtime::find_extension(size_t id) const noexcept {
  if (id < Impl::kFastExtensions) return impl_->fast_extensions[id].load(std::memory_order_acquire);
  std::lock_guard<std::recursive_mutex> lock(impl_->extension_mu);
  for (const auto& [i, p] : impl_->extensions)
    if (i == id) return p.get();
  return nullptr;
}

void* Runtime::make_extension(size_t id, std::shared_ptr<void> (*make)(Runtime&)) {
  // Made under the lock: two threads asking at once get one object.
  std::lock_guard<std::recursive_mutex> lock(impl_->extension_mu);
  for (const auto& [i, p] : impl_->extensions)
    if (i == id) return p.get();
  if (impl_->destroying)
    throw Error(Errc::InvalidArgument,
                "Runtime::extension: a new extension was asked for while the runtime is being "
                "destroyed (an extension's destructor may use only extensions made before it)");
  std::shared_ptr<void> made = make(*this);
  impl_->extensions.emplace_back(id, made);
  if (id < Impl::kFastExtensions)
    impl_->fast_extensions[id].store(made.get(), std::memory_order_release);
  return made.get();
}

bool gpu_available(std::string* why) {
  if (!detail::driver_available(why)) return false;
  int count = 0;
  if (detail::driver().cuDeviceGetCount_fn(&count) != CUDA_SUCCESS || count == 0) {
    if (why) *why = "a CUDA driver is present but reports no device";
    return false;
  }
  return true;
}

}  // namespace kjit
