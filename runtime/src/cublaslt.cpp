#include "cublaslt.hpp"

#include <utility>

#include "kjit/error.hpp"

namespace kjit::detail::lt {

std::string status_text(cublasStatus_t st) {
  const char* name = cublasLtGetStatusName(st);
  const char* text = cublasLtGetStatusString(st);
  return std::string(name ? name : "CUBLAS_STATUS_?") + " (" + (text ? text : "unknown") + ")";
}

void check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw Error(Errc::Cublas, std::string(what) + " failed: " + status_text(st));
}

size_t version() {
  return cublasLtGetVersion();
}

Handle::Handle() {
  check(cublasLtCreate(&h_), "cublasLtCreate");
}

Handle::~Handle() {
  if (h_) cublasLtDestroy(h_);
}

Layout::Layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  check(cublasLtMatrixLayoutCreate(&l_, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
}

Layout::~Layout() {
  if (l_) cublasLtMatrixLayoutDestroy(l_);
}

Layout::Layout(Layout&& o) noexcept : l_(std::exchange(o.l_, nullptr)) {}

Layout& Layout::operator=(Layout&& o) noexcept {
  if (this != &o) {
    if (l_) cublasLtMatrixLayoutDestroy(l_);
    l_ = std::exchange(o.l_, nullptr);
  }
  return *this;
}

Preference::Preference() {
  check(cublasLtMatmulPreferenceCreate(&p_), "cublasLtMatmulPreferenceCreate");
}

Preference::~Preference() {
  if (p_) cublasLtMatmulPreferenceDestroy(p_);
}

Preference& Preference::max_workspace(uint64_t bytes) {
  check(cublasLtMatmulPreferenceSetAttribute(p_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                             sizeof(bytes)),
        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  return *this;
}

Preference& Preference::min_alignment(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> attrs[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d}};
  for (const auto& [attr, v] : attrs)
    check(cublasLtMatmulPreferenceSetAttribute(p_, attr, &v, sizeof(v)),
          "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
  return *this;
}

MatmulDesc::MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
  check(cublasLtMatmulDescInit(&d_, compute, scale), "cublasLtMatmulDescInit");
}

void MatmulDesc::set_raw(cublasLtMatmulDescAttributes_t attr, const void* v, size_t n) {
  const cublasStatus_t st = cublasLtMatmulDescSetAttribute(&d_, attr, v, n);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(Errc::Cublas, "cublasLtMatmulDescSetAttribute(attribute " +
                                  std::to_string(static_cast<int>(attr)) +
                                  ") failed: " + status_text(st));
}

std::vector<cublasLtMatmulHeuristicResult_t> usable(cublasLtHandle_t h, MatmulDesc& desc,
                                                    const Layout& a, const Layout& b,
                                                    const Layout& c, const Layout& d,
                                                    const Preference& pref, int count, int* asked) {
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(count));
  int n = 0;
  check(cublasLtMatmulAlgoGetHeuristic(h, desc.get(), a.get(), b.get(), c.get(), d.get(),
                                       pref.get(), count, res.data(), &n),
        "cublasLtMatmulAlgoGetHeuristic");
  std::vector<cublasLtMatmulHeuristicResult_t> ok;
  for (int i = 0; i < n; ++i)
    if (res[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
      ok.push_back(res[static_cast<size_t>(i)]);
  if (asked) *asked = n;
  return ok;
}

std::vector<cublasLtMatmulHeuristicResult_t> heuristic(cublasLtHandle_t h, MatmulDesc& desc,
                                                       const Layout& a, const Layout& b,
                                                       const Layout& c, const Layout& d,
                                                       const Preference& pref, int count) {
  int n = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> ok = usable(h, desc, a, b, c, d, pref, count, &n);
  if (ok.empty())
    throw Error(Errc::Cublas, "cublasLtMatmulAlgoGetHeuristic returned no usable algorithm (" +
                                  std::to_string(n) + " candidates, none usable)");
  return ok;
}

bool algo_ok(cublasLtHandle_t h, MatmulDesc& desc, const Layout& a, const Layout& b,
             const Layout& c, const Layout& d, const cublasLtMatmulAlgo_t& algo,
             size_t* workspace) {
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(h, desc.get(), a.get(), b.get(), c.get(), d.get(), &algo, &r) !=
      CUBLAS_STATUS_SUCCESS)
    return false;
  if (workspace) *workspace = r.workspaceSize;
  return true;
}

AlgoFields fields(const cublasLtMatmulAlgo_t& algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto zero) -> long long {
    decltype(zero) v = zero;
    size_t written = 0;
    check(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written),
          "cublasLtMatmulAlgoConfigGetAttribute");
    return static_cast<long long>(v);
  };
  return {get(CUBLASLT_ALGO_CONFIG_ID, int32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_TILE_ID, uint32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_STAGES_ID, uint32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, uint32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, uint32_t{0}),
          get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, uint16_t{0})};
}

}  // namespace kjit::detail::lt
