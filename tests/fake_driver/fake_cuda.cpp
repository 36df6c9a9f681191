// The fake driver's one exported entry point, cuGetProcAddress_v2, hands out the functions of
// fake_entries.hpp: one for each entry of kjit's driver table (the table's own X-macro lists
// them, so a new entry that the fake lacks does not compile) and the few kjit looks up by name.
// Also the tests' window (fake_cuda.h).
#include "fake_cuda.h"

#include <cudaTypedefs.h>

#include <cstring>
#include <string>
#include <unordered_map>

#include "../../runtime/src/cuda_driver.hpp"
#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {

const char* const kFaultNames[kFaultPoints] = {"cuLaunchKernelEx", "cuModuleLoadData",
                                               "cuFuncGetAttribute", "cuMemAlloc"};

namespace {

struct Entry {
  void* fn;
  int version;  // the oldest CUDA version that has this ABI
};

const std::unordered_map<std::string, Entry>& entries() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, Entry>;
    // Each function typed as kjit calls it: a signature that differs does not compile.
#define KJIT_FAKE_ENTRY(name, version) \
  (*t)[#name] = {reinterpret_cast<void*>(static_cast<PFN_##name##_v##version>(&name)), version};
    KJIT_DRIVER_FUNCTIONS(KJIT_FAKE_ENTRY)
    KJIT_FAKE_ENTRY(cuCtxGetExecAffinity, 11040)
    KJIT_FAKE_ENTRY(cuFuncGetParamInfo, 12040)
    KJIT_FAKE_ENTRY(cuGraphNodeGetType, 10000)
    KJIT_FAKE_ENTRY(cuGraphKernelNodeGetParams, 12000)
#undef KJIT_FAKE_ENTRY
    // Newer than this toolkit's cudaTypedefs.h: typed by their documentation.
    using GetName = CUresult (*)(const char**, CUfunction);
    using GetParamCount = CUresult (*)(CUfunction, size_t*);
    (*t)["cuFuncGetName"] = {reinterpret_cast<void*>(static_cast<GetName>(&cuFuncGetName)), 12030};
    (*t)["cuFuncGetParamCount"] = {
        reinterpret_cast<void*>(static_cast<GetParamCount>(&cuFuncGetParamCount)), 13040};
    return t;
  }();
  return *table;
}

}  // namespace
}  // namespace kjit_fake

extern "C" {

// Like the real driver: an unknown name, or one newer than the version asked for (or than the
// driver itself), is CUDA_SUCCESS with a null pointer and SYMBOL_NOT_FOUND /
// VERSION_NOT_SUFFICIENT.
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int version, cuuint64_t, CUdriverProcAddressQueryResult* st) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  const auto& t = kjit_fake::entries();
  auto it = t.find(symbol);
  *pfn = nullptr;
  CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (it != t.end() && it->second.version <= kjit_fake::driver_version())
    r = version >= it->second.version ? CU_GET_PROC_ADDRESS_SUCCESS
                                      : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  if (r == CU_GET_PROC_ADDRESS_SUCCESS) *pfn = it->second.fn;
  if (st) *st = r;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) uint64_t kjit_fake_launches(void) {
  return kjit_fake::state().launches.load();
}
__attribute__((visibility("default"))) int kjit_fake_last_launch(kjit_fake_launch* out) {
  if (!kjit_fake::launched()) return 0;
  *out = kjit_fake::last_launch();
  return 1;
}
__attribute__((visibility("default"))) uint64_t kjit_fake_module_loads(void) {
  return kjit_fake::state().module_loads.load();
}
__attribute__((visibility("default"))) int64_t kjit_fake_live_modules(void) {
  return kjit_fake::state().live_modules.load();
}
__attribute__((visibility("default"))) int64_t kjit_fake_live_allocations(void) {
  kjit_fake::State& s = kjit_fake::state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  return static_cast<int64_t>(s.allocations.size());
}
__attribute__((visibility("default"))) uint64_t kjit_fake_graph_launches(void) {
  return kjit_fake::state().graph_launches.load();
}
__attribute__((visibility("default"))) int kjit_fake_fail(const char* entry, int n, CUresult r) {
  if (!entry) return 0;
  for (int p = 0; p < kjit_fake::kFaultPoints; ++p)
    if (std::strcmp(entry, kjit_fake::kFaultNames[p]) == 0) {
      kjit_fake::state().faults[p].with = r;
      kjit_fake::state().faults[p].left = n;
      return 1;
    }
  return 0;
}
}
