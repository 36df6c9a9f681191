#include "kjit/c_api.h"

#include <cstring>
#include <mutex>
#include <string>

#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/runtime.hpp"
#include "kjit/version.hpp"

namespace {

thread_local std::string g_error;

kjit::Runtime& runtime() {
  static kjit::Runtime rt;
  return rt;
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    g_error.clear();
    return 0;
  } catch (const kjit::Error& e) {
    g_error = std::string(kjit::errc_name(e.code())) + ": " + e.what();
    return static_cast<int>(e.code()) + 1;
  } catch (const std::exception& e) {
    g_error = std::string("internal: ") + e.what();
    return 1000;
  }
}

const char* not_null(const char* s, const char* what) {
  if (!s) throw kjit::Error(kjit::Errc::InvalidArgument, std::string(what) + " is NULL");
  return s;
}

// Each entry point checks its arguments before runtime(): a bad one is reported as such, not as
// "no driver" on a machine without a GPU.
kjit::ops::GroupNormProblem gn_problem(const char* dtype, const char* layout, int64_t n, int64_t c,
                                       int64_t s, int64_t groups, int silu, bool affine) {
  kjit::ops::GroupNormProblem p;
  p.dtype = p.param_dtype = kjit::parse_dtype(not_null(dtype, "dtype"));
  p.layout = kjit::ops::parse_layout(not_null(layout, "layout"));
  p.N = n;
  p.C = c;
  p.S = s;
  p.groups = groups;
  p.activation = silu ? kjit::ops::Activation::SiLU : kjit::ops::Activation::None;
  p.has_weight = p.has_bias = affine;
  return p;
}

kjit::ops::LinearGnMinProblem lgm_problem(const char* precision, int64_t m, int64_t k, int64_t n,
                                          int64_t groups) {
  kjit::ops::LinearGnMinProblem p;
  p.M = m;
  p.K = k;
  p.N = n;
  p.G = groups;
  p.precision = kjit::ops::parse_precision(not_null(precision, "precision"));
  return p;
}

void copy_text(const std::string& text, char* buf, int64_t size) {
  if (buf && size > 0) {
    std::strncpy(buf, text.c_str(), static_cast<size_t>(size) - 1);
    buf[size - 1] = '\0';
  }
}

}  // namespace

extern "C" {

const char* kjit_last_error(void) {
  return g_error.c_str();
}
const char* kjit_version(void) {
  return KJIT_VERSION_STRING;
}

int kjit_group_norm(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                    int64_t groups, int silu, const void* x, void* y, const void* weight,
                    const void* bias, float eps, void* stream, int autotune) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, silu, weight || bias);
    p.has_weight = weight != nullptr;
    p.has_bias = bias != nullptr;
    kjit::ops::GroupNormOptions o;
    o.eps = eps;
    o.autotune = autotune != 0;
    kjit::ops::validate_call(p, x, y, weight, bias, eps);
    kjit::ops::group_norm(runtime(), p, x, y, weight, bias, o, static_cast<CUstream>(stream));
  });
}

int kjit_group_norm_prepare(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                            int64_t groups, int silu, int affine, int autotune, char* buf,
                            int64_t size) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, silu, affine != 0);
    kjit::ops::validate(p);
    kjit::ops::GroupNormOptions o;
    o.autotune = autotune != 0;
    copy_text(kjit::ops::prepare_group_norm(runtime(), p, o).describe(), buf, size);
  });
}

int kjit_group_norm_reserve_workspace(const char* dtype, const char* layout, int64_t n, int64_t c,
                                      int64_t s, int64_t groups, int silu, int affine, int autotune,
                                      void* stream, int64_t* bytes) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, silu, affine != 0);
    kjit::ops::validate(p);
    kjit::ops::GroupNormOptions o;
    o.autotune = autotune != 0;
    const size_t b =
        kjit::ops::reserve_group_norm_workspace(runtime(), p, o, static_cast<CUstream>(stream));
    if (bytes) *bytes = static_cast<int64_t>(b);
  });
}

int kjit_linear_gn_min(const char* precision, int64_t m, int64_t k, int64_t n, int64_t groups,
                       const void* x, const void* weight, const float* linear_bias,
                       const float* gamma, const float* beta, const float* bias, float* out,
                       float eps, void* stream, int autotune) {
  return guarded([&] {
    kjit::ops::LinearGnMinOptions o;
    o.eps = eps;
    o.autotune = autotune != 0;
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate_call(p, x, weight, linear_bias, gamma, beta, bias, out, o);
    kjit::ops::linear_gn_min(runtime(), p, x, weight, linear_bias, gamma, beta, bias, out, o,
                             static_cast<CUstream>(stream));
  });
}

int kjit_linear_gn_min_prepare(const char* precision, int64_t m, int64_t k, int64_t n,
                               int64_t groups, int autotune, char* buf, int64_t size) {
  return guarded([&] {
    kjit::ops::LinearGnMinOptions o;
    o.autotune = autotune != 0;
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate(p);
    auto info = kjit::ops::prepare_linear_gn_min(runtime(), p, o);
    copy_text(info.kernel + "; GEMM " + info.gemm_algo + " (" + info.gemm_source + ")", buf, size);
  });
}

int kjit_linear_gn_min_reserve_workspace(const char* precision, int64_t m, int64_t k, int64_t n,
                                         int64_t groups, void* stream) {
  return guarded([&] {
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate(p);
    kjit::ops::reserve_linear_gn_min_workspace(runtime(), p, static_cast<CUstream>(stream));
  });
}

}  // extern "C"
