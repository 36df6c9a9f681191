// The driver loader's entry-point table (runtime/src/cuda_driver.hpp), against a fake
// cuGetProcAddress that answers as a CUDA 13 driver does: the newest variant of a name at the
// version asked for. kjit once asked at its header's CUDA_VERSION and got cuCtxSynchronize_v2,
// which takes a context, then called it with none (a segfault under compute-sanitizer).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <type_traits>

#include "../../runtime/src/cuda_driver.hpp"

namespace {

struct Request {
  int version = 0;
  cuuint64_t flags = 0;
  int count = 0;
};
std::map<std::string, Request> g_requests;
const char* g_missing = nullptr;  // a name the fake driver lacks

CUresult sync_v1() {
  return CUDA_SUCCESS;
}
CUresult sync_v2(CUcontext) {
  return CUDA_SUCCESS;
}
CUresult stream_ctx_v1(CUstream, CUcontext*) {
  return CUDA_SUCCESS;
}
CUresult stream_ctx_v2(CUstream, CUcontext*, CUgreenCtx*) {
  return CUDA_SUCCESS;
}
CUresult any_entry() {
  return CUDA_SUCCESS;
}

CUresult fake_gpa(const char* symbol, void** pfn, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status) {
  Request& r = g_requests[symbol];
  r.version = version;
  r.flags = flags;
  ++r.count;
  const std::string s = symbol;
  // Like the driver: a missing symbol is CUDA_SUCCESS with a null pointer and a status.
  if (g_missing && s == g_missing) {
    *pfn = nullptr;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  void* p = reinterpret_cast<void*>(&any_entry);
  if (s == "cuCtxSynchronize")
    p = version >= 13000 ? reinterpret_cast<void*>(&sync_v2) : reinterpret_cast<void*>(&sync_v1);
  if (s == "cuStreamGetCtx")
    p = version >= 12050 ? reinterpret_cast<void*>(&stream_ctx_v2)
                         : reinterpret_cast<void*>(&stream_ctx_v1);
  *pfn = p;
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

int table_size() {
#define KJIT_COUNT(name, version) +1
  return 0 KJIT_DRIVER_FUNCTIONS(KJIT_COUNT);
#undef KJIT_COUNT
}

}  // namespace

TEST_CASE("driver loader: every entry is asked for once, at an ABI a 12.0 driver has") {
  g_requests.clear();
  g_missing = nullptr;
  kjit::detail::Driver d;
  std::string why;
  REQUIRE(kjit::detail::resolve_driver(&fake_gpa, &d, &why));
  CHECK(why.empty());
  CHECK(static_cast<int>(g_requests.size()) == table_size());
  for (const auto& kv : g_requests) {
    // Not a structured binding: clang 14 cannot capture one in doctest's INFO lambda.
    const auto& name = kv.first;
    const auto& r = kv.second;
    INFO(name << " asked for at " << r.version);
    CHECK(r.count == 1);
    CHECK(r.version > 0);
    CHECK(r.version <= kjit::detail::kMinDriverVersion);
    CHECK(r.flags == CU_GET_PROC_ADDRESS_DEFAULT);
  }
}

TEST_CASE("driver loader: names CUDA 13 re-versioned get the ABI their table type declares") {
  g_requests.clear();
  g_missing = nullptr;
  kjit::detail::Driver d;
  std::string why;
  REQUIRE(kjit::detail::resolve_driver(&fake_gpa, &d, &why));
  CHECK(reinterpret_cast<void*>(d.cuCtxSynchronize_fn) == reinterpret_cast<void*>(&sync_v1));
  CHECK(reinterpret_cast<void*>(d.cuStreamGetCtx_fn) == reinterpret_cast<void*>(&stream_ctx_v1));
  // The types say the same at compile time: no context argument, two arguments.
  static_assert(std::is_same_v<decltype(d.cuCtxSynchronize_fn), CUresult (*)()>);
  static_assert(std::is_same_v<decltype(d.cuStreamGetCtx_fn), CUresult (*)(CUstream, CUcontext*)>);
}

TEST_CASE("driver loader: a driver without an entry point is refused with its name") {
  g_requests.clear();
  g_missing = "cuLaunchKernelEx";
  kjit::detail::Driver d;
  std::string why;
  CHECK_FALSE(kjit::detail::resolve_driver(&fake_gpa, &d, &why));
  CHECK(why.find("cuLaunchKernelEx") != std::string::npos);
  CHECK(why.find("11.6") != std::string::npos);
  g_missing = nullptr;
}
