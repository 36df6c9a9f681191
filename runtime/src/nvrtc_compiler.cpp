// NVRTC: specialization -> cubin (or PTX), with lowered names; the disk cache in front.
#include <cuda.h>  // CUDA_VERSION only
#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/record.hpp"
#include "kjit/version.hpp"

namespace kjit {
namespace {

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw Error(Errc::Nvrtc, std::string(what) + " failed: " + nvrtcGetErrorString(r));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

struct Target {
  int sm = 0;
  std::string suffix;  // "", "a" or "f"
  bool ptx = false;
};

// "sm_90", "sm_90a", "sm_100f", "compute_90": checked against what this NVRTC supports.
Target parse_arch(const std::string& arch) {
  Target t;
  std::string digits;
  if (arch.rfind("sm_", 0) == 0) {
    digits = arch.substr(3);
  } else if (arch.rfind("compute_", 0) == 0) {
    digits = arch.substr(8);
    t.ptx = true;
  }
  while (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    t.suffix.insert(t.suffix.begin(), digits.back());
    digits.pop_back();
  }
  bool numeric =
      !digits.empty() && digits.size() <= 4 && digits[0] != '0' &&  // one spelling per arch
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!numeric || t.suffix.size() > 1)
    throw Error(Errc::InvalidArgument,
                "arch '" + arch + "' is not of the form sm_NN, sm_NNa, sm_NNf or compute_NN");
  t.sm = std::stoi(digits);
  // NVRTC takes sm_80a and fails only when it compiles: refused here, before any work.
  if ((t.suffix == "a" && t.sm < 90) || (t.suffix == "f" && t.sm < 100))
    throw Error(Errc::Unsupported, "arch '" + arch + "': the '" + t.suffix +
                                       "' variant exists only for " +
                                       (t.suffix == "a" ? "sm_90" : "sm_100") + " and newer");
  auto sms = Compiler::supported_sm();
  if (std::find(sms.begin(), sms.end(), t.sm) == sms.end()) {
    std::string list;
    for (int s : sms) list += (list.empty() ? "" : ", ") + std::string("sm_") + std::to_string(s);
    throw Error(Errc::Unsupported, "arch '" + arch + "' is not supported by NVRTC " +
                                       Compiler::nvrtc_version() + " (it supports " + list + ")");
  }
  return t;
}

}  // namespace

int Compiler::arch_sm(const std::string& arch) {
  return parse_arch(arch).sm;
}

namespace {

std::string join_options(const std::vector<std::string>& opts) {
  std::string s;
  for (const auto& o : opts) s += (s.empty() ? "" : " ") + o;
  return s;
}

std::string program_log(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return {};
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  log.resize(n - 1);
  return log;
}

std::string program_binary(nvrtcProgram p, bool ptx) {
  size_t n = 0;
  std::string bin;
  if (ptx) {
    check_nvrtc(nvrtcGetPTXSize(p, &n), "nvrtcGetPTXSize");
    bin.resize(n);
    check_nvrtc(nvrtcGetPTX(p, bin.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(nvrtcGetCUBINSize(p, &n), "nvrtcGetCUBINSize");
    bin.resize(n);
    check_nvrtc(nvrtcGetCUBIN(p, bin.data()), "nvrtcGetCUBIN");
  }
  return bin;
}

cache::Entry to_entry(const CompiledKernel& k, const Spec& spec) {
  cache::Entry e;
  e.label = k.instantiation + " [" + k.arch + "]";
  e.metadata = {{"kind", "kernel"},
                {"header", spec.header()},
                {"instantiation", k.instantiation},
                {"lowered_name", k.lowered_name},
                {"arch", k.arch},
                {"format", k.is_ptx ? "ptx" : "cubin"},
                {"nvrtc", Compiler::nvrtc_version()},
                {"compile_ms", std::to_string(k.compile_ms)},
                {"log", k.log}};
  e.payload = k.binary;
  return e;
}

// A cache entry that parses but lacks what we need is treated like a corrupt one: recompile.
bool from_entry(const cache::Entry& e, const Spec& spec, const std::string& arch,
                CompiledKernel* k) {
  const std::string* inst = e.find("instantiation");
  const std::string* lowered = e.find("lowered_name");
  const std::string* a = e.find("arch");
  const std::string* fmt = e.find("format");
  const std::string* header = e.find("header");
  if (!inst || !lowered || !a || !fmt || !header || e.payload.empty()) return false;
  if (*inst != spec.instantiation() || *header != spec.header() || *a != arch || lowered->empty())
    return false;
  k->instantiation = *inst;
  k->lowered_name = *lowered;
  k->arch = *a;
  k->is_ptx = *fmt == "ptx";
  k->binary = e.payload;
  if (const std::string* log = e.find("log")) k->log = *log;
  if (const std::string* ms = e.find("compile_ms")) k->compile_ms = std::atof(ms->c_str());
  k->from_disk = true;
  return true;
}

}  // namespace

namespace {

// A remote tier asked for and misconfigured (a bad URL, no fleet key) is the caller's error:
// silently compiling everywhere instead would hide it from the whole fleet.
std::unique_ptr<cache::DiskCache> open_cache(cache::Options o) {
  try {
    return std::make_unique<cache::DiskCache>(std::move(o));
  } catch (const std::invalid_argument& e) {
    throw Error::invalid("remote_cache", e.what());
  }
}

}  // namespace

Compiler::Compiler(cache::Options cache_options) : disk_(open_cache(std::move(cache_options))) {}

Compiler::~Compiler() = default;

const std::vector<std::string>& Compiler::options() {
  // No --use_fast_math: results must match PyTorch's. -default-device: helpers need no
  // __device__ annotation. No include paths, and -no-source-include: NVRTC would otherwise look
  // for a quoted include it was not given beside the including header's name on disk (relative
  // to the working directory), text the cache key does not cover.
  static const std::vector<std::string> opts = {"--std=c++17", "-default-device",
                                                "-no-source-include"};
  return opts;
}

std::string Compiler::nvrtc_version() {
  int major = 0, minor = 0;
  check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> Compiler::supported_sm() {
  int n = 0;
  check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> v(static_cast<size_t>(n));
  if (n > 0) check_nvrtc(nvrtcGetSupportedArchs(v.data()), "nvrtcGetSupportedArchs");
  return v;
}

std::string Compiler::arch_for_cc(int cc) {
  auto sms = supported_sm();
  if (std::find(sms.begin(), sms.end(), cc) != sms.end()) return "sm_" + std::to_string(cc);
  int newest = sms.empty() ? 0 : *std::max_element(sms.begin(), sms.end());
  if (cc > newest) return "compute_" + std::to_string(newest);
  throw Error(Errc::Unsupported, "device compute capability " + std::to_string(cc / 10) + "." +
                                     std::to_string(cc % 10) + " is not supported by NVRTC " +
                                     nvrtc_version());
}

const std::string& Compiler::nvrtc_build() {
  static const std::string build = [] {
    Dl_info info{};
    struct stat st {};
    if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || !info.dli_fname ||
        stat(info.dli_fname, &st) != 0)
      return std::string("unknown");
    const std::string path = info.dli_fname;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    // Linked statically, NVRTC lives in the executable, whose size says nothing about it.
    if (name.find("nvrtc") == std::string::npos) return std::string("static");
    return name + " " + std::to_string(st.st_size);
  }();
  return build;
}

cache::Key Compiler::key(const Spec& spec, const std::string& arch) {
  return key_of(spec, arch, templates_.closure(spec.header()));
}

cache::Key Compiler::key_of(const Spec& spec, const std::string& arch,
                            const Closure& headers) const {
  cache::KeyBuilder kb;
  kb.add("record", "kjit-kernel-v2").add("kjit", KJIT_VERSION_STRING);
  for (const auto& [name, text] : headers) kb.add(name, text);
  kb.add("root_header", spec.header());  // the program NVRTC compiles: #include "<header>"
  kb.add("instantiation", spec.instantiation());
  kb.add("options", join_options(options()));
  kb.add("nvrtc", nvrtc_version()).add("cuda_headers", static_cast<int64_t>(CUDA_VERSION));
  kb.add("nvrtc_build", nvrtc_build());
  kb.add("arch", arch);
  return kb.finish();
}

CompiledKernel Compiler::compile(const Spec& spec, const std::string& arch) {
  return compile_with(spec, arch, templates_.closure(spec.header()));
}

CompiledKernel Compiler::compile_with(const Spec& spec, const std::string& arch,
                                      const Closure& headers) {
  Target target = parse_arch(arch);
  std::vector<const char*> names, texts;
  for (const auto& [n, t] : headers) {
    names.push_back(n.c_str());
    texts.push_back(t.c_str());
  }
  const std::string source = "#include \"" + spec.header() + "\"\n";
  const std::string inst = spec.instantiation();
  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, source.c_str(), "kjit_specialization.cu",
                                 static_cast<int>(headers.size()), texts.data(), names.data()),
              "nvrtcCreateProgram");
  Program prog(raw);
  check_nvrtc(nvrtcAddNameExpression(raw, inst.c_str()), "nvrtcAddNameExpression");

  std::vector<std::string> opts = options();
  opts.push_back("-arch=" + arch);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());

  auto t0 = std::chrono::steady_clock::now();
  nvrtcResult r = nvrtcCompileProgram(raw, static_cast<int>(copts.size()), copts.data());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::string log = program_log(raw);
  if (r != NVRTC_SUCCESS)
    throw Error(Errc::Compile,
                "NVRTC failed to compile " + inst + " (header " + spec.header() + ", options " +
                    join_options(opts) + "): " + nvrtcGetErrorString(r) + "\n" + log,
                log);
  compiles_.fetch_add(1, std::memory_order_relaxed);
  compile_us_.fetch_add(static_cast<uint64_t>(ms * 1000), std::memory_order_relaxed);

  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(raw, inst.c_str(), &lowered), "nvrtcGetLoweredName");
  CompiledKernel k;
  k.instantiation = inst;
  k.lowered_name = lowered ? lowered : "";
  k.arch = arch;
  k.is_ptx = target.ptx;
  k.binary = program_binary(raw, target.ptx);
  k.log = std::move(log);
  k.compile_ms = ms;
  return k;
}

CompiledKernel Compiler::get(const Spec& spec, const std::string& arch) {
  parse_arch(arch);  // reject a bad arch before it reaches a key
  const Closure headers = templates_.closure(spec.header());
  cache::Key k = key_of(spec, arch, headers);
  CompiledKernel out;
  bool made = false;
  cache::Entry e = disk_->get_or_make(
      k, [&] { return to_entry(out = compile_with(spec, arch, headers), spec); }, &made);
  if (!made && !from_entry(e, spec, arch, &out)) {
    // Valid file, wrong content for this spec (cannot happen short of a key collision or a
    // foreign writer): compile and overwrite.
    out = compile_with(spec, arch, headers);
    disk_->put(k, to_entry(out, spec));
  }
  // The closure the key covers, not a fresh read: a header replaced meanwhile cannot be recorded
  // under this specialization.
  if (recorder_ && !Recorder::in_op_build()) recorder_->kernel(spec, headers);
  return out;
}

CompilerStats Compiler::stats() const {
  CompilerStats s;
  s.nvrtc_compiles = compiles_.load(std::memory_order_relaxed);
  s.nvrtc_ms = compile_us_.load(std::memory_order_relaxed) / 1000.0;
  s.disk = disk_->stats();
  if (cache::RemoteCache* r = disk_->remote()) {
    s.remote_enabled = true;
    s.remote = r->stats();
  }
  return s;
}

}  // namespace kjit
