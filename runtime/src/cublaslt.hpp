// Thin RAII over cuBLASLt: the handle, matrix layouts, heuristic preferences and matmul
// descriptors. Every status is checked: a failure throws Error(Errc::Cublas) naming the call and
// the status (name and text). cuBLASLt calls need the runtime's context current (ContextGuard).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kjit::detail::lt {

std::string status_text(cublasStatus_t st);  // "CUBLAS_STATUS_NOT_SUPPORTED (...)"
// Throws Error(Errc::Cublas, "<what> failed: <status>") unless st is CUBLAS_STATUS_SUCCESS.
void check(cublasStatus_t st, const char* what);
size_t version();  // cublasLtGetVersion(), e.g. 130000

class Handle {
 public:
  Handle();  // cublasLtCreate
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cublasLtHandle_t get() const { return h_; }

 private:
  cublasLtHandle_t h_ = nullptr;
};

// A column-major matrix layout (cublasLtMatrixLayoutCreate).
class Layout {
 public:
  Layout() = default;
  Layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld);
  ~Layout();
  Layout(Layout&& o) noexcept;
  Layout& operator=(Layout&& o) noexcept;
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  cublasLtMatrixLayout_t get() const { return l_; }

 private:
  cublasLtMatrixLayout_t l_ = nullptr;
};

class Preference {
 public:
  Preference();  // cublasLtMatmulPreferenceCreate
  ~Preference();
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  Preference& max_workspace(uint64_t bytes);
  Preference& min_alignment(uint32_t a_bytes, uint32_t b_bytes, uint32_t c_bytes, uint32_t d_bytes);
  cublasLtMatmulPreference_t get() const { return p_; }

 private:
  cublasLtMatmulPreference_t p_ = nullptr;
};

// A matmul descriptor in storage of its own (cublasLtMatmulDescInit on the embedded opaque
// struct): no heap allocation, nothing to destroy, so the hot path builds one per call on the
// stack instead of sharing a mutable descriptor (its bias pointer) between threads.
class MatmulDesc {
 public:
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale);
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <class T>
  MatmulDesc& set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    set_raw(attr, &value, sizeof(T));
    return *this;
  }
  cublasLtMatmulDesc_t get() { return &d_; }

 private:
  void set_raw(cublasLtMatmulDescAttributes_t attr, const void* v, size_t n);
  cublasLtMatmulDescOpaque_t d_{};
};

// Up to `count` algorithms from cublasLtMatmulAlgoGetHeuristic, best first, only those whose
// state is success (none: an empty list); throws Errc::Cublas when the call itself fails.
// *asked (when given): how many the heuristic returned, usable or not.
std::vector<cublasLtMatmulHeuristicResult_t> usable(cublasLtHandle_t h, MatmulDesc& desc,
                                                    const Layout& a, const Layout& b,
                                                    const Layout& c, const Layout& d,
                                                    const Preference& pref, int count,
                                                    int* asked = nullptr);
// The same, and throws Errc::Cublas when cuBLASLt has none for the problem.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic(cublasLtHandle_t h, MatmulDesc& desc,
                                                       const Layout& a, const Layout& b,
                                                       const Layout& c, const Layout& d,
                                                       const Preference& pref, int count);
// cublasLtMatmulAlgoCheck: true (and *workspace set) when the algorithm runs this problem.
bool algo_ok(cublasLtHandle_t h, MatmulDesc& desc, const Layout& a, const Layout& b,
             const Layout& c, const Layout& d, const cublasLtMatmulAlgo_t& algo, size_t* workspace);
// The algorithm's config attributes that kjit reports and pins (cuBLASLt's values: split-k may
// be -1); throws Errc::Cublas when cuBLASLt cannot read one.
struct AlgoFields {
  long long id, tile, stages, splitk, reduction, swizzle, cluster;
};
AlgoFields fields(const cublasLtMatmulAlgo_t& algo);

}  // namespace kjit::detail::lt
