#include "kjit/c_api.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/runtime.hpp"
#include "kjit/version.hpp"

// The C handle of a prepacked weight (kjit_linear_gn_min_prepack).
struct kjit_linear_gn_min_pack {
  kjit::ops::LinearGnMinWeights weights;
};

namespace {

thread_local std::string g_error;

kjit::Runtime& runtime() {
  static kjit::Runtime rt;
  return rt;
}

// The packs kjit_linear_gn_min_prepack handed out and that are not freed yet: a second free, or a
// call with a freed or made-up handle, is KJIT_ERR_INVALID_ARGUMENT instead of undefined
// behaviour. Never destroyed, so that a free from an exit handler is still checked.
struct LivePacks {
  std::mutex mu;
  std::unordered_set<const kjit_linear_gn_min_pack*> packs;
};
constexpr const char* kNotLivePack =
    "pack is not a live pack of kjit_linear_gn_min_prepack (freed already, or never made by it)";

LivePacks& live_packs() {
  static LivePacks* l = new LivePacks;
  return *l;
}

void require_live(const kjit_linear_gn_min_pack* pack) {
  if (!pack) throw kjit::Error::invalid("pack", "pack must not be NULL");
  LivePacks& l = live_packs();
  std::lock_guard<std::mutex> lock(l.mu);
  if (!l.packs.count(pack)) throw kjit::Error::invalid("pack", kNotLivePack);
}

// The codes the header promises, one per Errc.
static_assert(static_cast<int>(kjit::Errc::InvalidArgument) + 1 == KJIT_ERR_INVALID_ARGUMENT);
static_assert(static_cast<int>(kjit::Errc::NoDriver) + 1 == KJIT_ERR_NO_DRIVER);
static_assert(static_cast<int>(kjit::Errc::NoDevice) + 1 == KJIT_ERR_NO_DEVICE);
static_assert(static_cast<int>(kjit::Errc::Cuda) + 1 == KJIT_ERR_CUDA);
static_assert(static_cast<int>(kjit::Errc::Nvrtc) + 1 == KJIT_ERR_NVRTC);
static_assert(static_cast<int>(kjit::Errc::Compile) + 1 == KJIT_ERR_COMPILE);
static_assert(static_cast<int>(kjit::Errc::Cublas) + 1 == KJIT_ERR_CUBLAS);
static_assert(static_cast<int>(kjit::Errc::Unsupported) + 1 == KJIT_ERR_UNSUPPORTED);
static_assert(static_cast<int>(kjit::Errc::CaptureCompile) + 1 == KJIT_ERR_CAPTURE_COMPILE);
static_assert(static_cast<int>(kjit::Errc::NotFound) + 1 == KJIT_ERR_NOT_FOUND);
static_assert(static_cast<int>(kjit::Errc::Io) + 1 == KJIT_ERR_IO);

// Builds the message without letting an allocation failure escape (nothing may cross extern
// "C"): without memory for it, the message is empty and the code still says what happened.
void set_error(const char* kind, const char* what) noexcept {
  try {
    g_error.assign(kind).append(": ").append(what);
  } catch (...) {
    g_error.clear();
  }
}

template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    g_error.clear();
    return KJIT_OK;
  } catch (const kjit::Error& e) {
    set_error(kjit::errc_name(e.code()), e.what());
    return static_cast<int>(e.code()) + 1;
  } catch (const std::exception& e) {
    set_error("internal", e.what());
  } catch (...) {
    set_error("internal", "an exception that is not a std::exception");
  }
  return KJIT_ERR_INTERNAL;
}

const char* not_null(const char* s, const char* what) {
  if (!s) throw kjit::Error(kjit::Errc::InvalidArgument, std::string(what) + " is NULL");
  return s;
}

// A KJIT_ACTIVATION_ constant as the enum; an unknown number is named, not cast.
kjit::Activation activation_of(int a) {
  switch (a) {
    case KJIT_ACTIVATION_NONE:
      return kjit::Activation::None;
    case KJIT_ACTIVATION_SILU:
      return kjit::Activation::SiLU;
    case KJIT_ACTIVATION_GELU_TANH:
      return kjit::Activation::GeluTanh;
    case KJIT_ACTIVATION_GELU:
      return kjit::Activation::GeluErf;
    case KJIT_ACTIVATION_RELU:
      return kjit::Activation::ReLU;
  }
  throw kjit::Error::invalid("activation", "activation = " + std::to_string(a) +
                                               " is not a KJIT_ACTIVATION_ constant (0 none, 1 "
                                               "silu, 2 gelu_tanh, 3 gelu, 4 relu)");
}

// Each entry point checks its arguments before runtime(): a bad one is reported as such, not as
// "no driver" on a machine without a GPU.
kjit::ops::GroupNormProblem gn_problem(const char* dtype, const char* layout, int64_t n, int64_t c,
                                       int64_t s, int64_t groups, int activation, bool affine) {
  kjit::ops::GroupNormProblem p;
  p.dtype = p.param_dtype = kjit::parse_dtype(not_null(dtype, "dtype"));
  p.layout = kjit::ops::parse_layout(not_null(layout, "layout"));
  p.N = n;
  p.C = c;
  p.S = s;
  p.groups = groups;
  p.activation = activation_of(activation);
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

// A NULL param_dtype is the dtype's; the operands a problem has are flags.
kjit::ops::LayerNormProblem ln_problem(const char* kind, const char* dtype, const char* param_dtype,
                                       int64_t rows, int64_t width, int activation, bool residual,
                                       bool weight, bool bias) {
  kjit::ops::LayerNormProblem p;
  p.kind = kjit::ops::parse_norm_kind(not_null(kind, "kind"));
  p.dtype = kjit::parse_dtype(not_null(dtype, "dtype"));
  p.param_dtype = param_dtype ? kjit::parse_dtype(param_dtype) : p.dtype;
  p.rows = rows;
  p.width = width;
  p.activation = activation_of(activation);
  p.residual = residual;
  p.has_weight = weight;
  p.has_bias = bias;
  return p;
}

// A call's options: eps, autotune, and the config pinned by its text (NULL: none), read by the
// op's pin_config_text (Linear-GN-min's may pin its GEMM too): a text that is no config of the op
// is InvalidArgument on field "config" before any work.
template <class Options>
Options options(float eps, int autotune, const char* config) {
  Options o;
  o.eps = eps;
  o.autotune = autotune != 0;
  if (config) pin_config_text(config, &o);  // the op's, found beside Options
  return o;
}
constexpr auto gn_options = options<kjit::ops::GroupNormOptions>;
constexpr auto lgm_options = options<kjit::ops::LinearGnMinOptions>;
constexpr auto ln_options = options<kjit::ops::LayerNormOptions>;

// buf and size, checked before any work: a caller that passes a buffer gets text in it or an
// error, never an untouched buffer.
void check_buffer(const char* buf, int64_t size) {
  if (buf && size <= 0)
    throw kjit::Error(kjit::Errc::InvalidArgument,
                      "size = " + std::to_string(size) + " must be > 0 when buf is not NULL");
}

// The text, or InvalidArgument naming the size it needs (nothing is written then).
void copy_text(const std::string& text, char* buf, int64_t size) {
  if (!buf) return;
  if (static_cast<uint64_t>(size) <= text.size())
    throw kjit::Error(kjit::Errc::InvalidArgument, "size = " + std::to_string(size) +
                                                       " is too small: the text needs " +
                                                       std::to_string(text.size() + 1) + " bytes");
  std::memcpy(buf, text.c_str(), text.size() + 1);
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
                    int64_t groups, int activation, const void* x, void* y, const void* weight,
                    const void* bias, float eps, void* stream, int autotune, const char* config) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, activation, weight || bias);
    p.has_weight = weight != nullptr;
    p.has_bias = bias != nullptr;
    const auto o = gn_options(eps, autotune, config);
    kjit::ops::validate_call(p, x, y, weight, bias, eps);
    kjit::ops::group_norm(runtime(), p, x, y, weight, bias, o, static_cast<CUstream>(stream));
  });
}

int kjit_group_norm_prepare(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                            int64_t groups, int activation, int affine, int autotune,
                            const char* config, char* buf, int64_t size) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, activation, affine != 0);
    kjit::ops::validate(p);
    check_buffer(buf, size);
    const auto o = gn_options(kjit::ops::GroupNormOptions{}.eps, autotune, config);
    copy_text(kjit::ops::prepare_group_norm(runtime(), p, o).describe(), buf, size);
  });
}

int kjit_group_norm_reserve_workspace(const char* dtype, const char* layout, int64_t n, int64_t c,
                                      int64_t s, int64_t groups, int activation, int affine,
                                      int autotune, const char* config, void* stream,
                                      int64_t* bytes) {
  return guarded([&] {
    auto p = gn_problem(dtype, layout, n, c, s, groups, activation, affine != 0);
    kjit::ops::validate(p);
    const auto o = gn_options(kjit::ops::GroupNormOptions{}.eps, autotune, config);
    const size_t b =
        kjit::ops::reserve_group_norm_workspace(runtime(), p, o, static_cast<CUstream>(stream));
    if (bytes) *bytes = static_cast<int64_t>(b);
  });
}

int kjit_linear_gn_min(const char* precision, int64_t m, int64_t k, int64_t n, int64_t groups,
                       const void* x, const void* weight, const float* linear_bias,
                       const float* gamma, const float* beta, const float* bias, float* out,
                       float eps, void* stream, int autotune, const char* config) {
  return guarded([&] {
    const auto o = lgm_options(eps, autotune, config);
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate_call(p, x, weight, linear_bias, gamma, beta, bias, out, o);
    kjit::ops::linear_gn_min(runtime(), p, x, weight, linear_bias, gamma, beta, bias, out, o,
                             static_cast<CUstream>(stream));
  });
}

int kjit_linear_gn_min_prepare(const char* precision, int64_t m, int64_t k, int64_t n,
                               int64_t groups, int autotune, const char* config, char* buf,
                               int64_t size) {
  return guarded([&] {
    const auto o = lgm_options(kjit::ops::LinearGnMinOptions{}.eps, autotune, config);
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate(p);
    check_buffer(buf, size);
    auto info = kjit::ops::prepare_linear_gn_min(runtime(), p, o);
    copy_text(info.describe(), buf, size);
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

int kjit_linear_gn_min_prepack(const char* precision, int64_t n, int64_t k, const float* weight,
                               void* stream, kjit_linear_gn_min_pack** pack) {
  if (pack) *pack = nullptr;
  return guarded([&] {
    if (!pack) throw kjit::Error::invalid("pack", "pack must not be NULL");
    const auto p = lgm_problem(precision, 1, k, n, 1);  // m and groups shape no pack
    kjit::ops::validate_prepack(n, k, p.precision, weight);
    auto w = std::make_unique<kjit_linear_gn_min_pack>();
    w->weights = kjit::ops::prepack_linear_gn_min(runtime(), n, k, p.precision, weight,
                                                  static_cast<CUstream>(stream));
    LivePacks& l = live_packs();
    std::lock_guard<std::mutex> lock(l.mu);
    l.packs.insert(w.get());
    *pack = w.release();
  });
}

int kjit_linear_gn_min_pack_free(kjit_linear_gn_min_pack* pack) {
  return guarded([&] {
    if (!pack) return;
    {
      LivePacks& l = live_packs();
      std::lock_guard<std::mutex> lock(l.mu);
      if (l.packs.erase(pack) == 0) throw kjit::Error::invalid("pack", kNotLivePack);
    }
    delete pack;
  });
}

int kjit_linear_gn_min_packed(const char* precision, int64_t m, int64_t k, int64_t n,
                              int64_t groups, const void* x, const kjit_linear_gn_min_pack* pack,
                              const float* linear_bias, const float* gamma, const float* beta,
                              const float* bias, float* out, float eps, void* stream, int autotune,
                              const char* config) {
  return guarded([&] {
    const auto o = lgm_options(eps, autotune, config);
    const auto p = lgm_problem(precision, m, k, n, groups);
    kjit::ops::validate(p);
    require_live(pack);
    kjit::ops::linear_gn_min(runtime(), p, x, pack->weights, linear_bias, gamma, beta, bias, out, o,
                             static_cast<CUstream>(stream));
  });
}

int kjit_layer_norm(const char* kind, const char* dtype, const char* param_dtype, int64_t rows,
                    int64_t width, int activation, const void* x, const void* residual, void* y,
                    void* sum, const void* weight, const void* bias, float eps, void* stream,
                    int autotune, const char* config) {
  return guarded([&] {
    const auto p = ln_problem(kind, dtype, param_dtype, rows, width, activation,
                              residual != nullptr, weight != nullptr, bias != nullptr);
    // C++ ignores the operands a problem does not have; here a sum without a residual is a
    // caller expecting it written.
    if (!residual && sum)
      throw kjit::Error::invalid("sum", std::string(kind) +
                                            ": sum is given without a residual: it is written "
                                            "only as x + residual (pass NULL, or a residual)");
    const auto o = ln_options(eps, autotune, config);
    kjit::ops::validate_call(p, x, residual, y, sum, weight, bias, eps);
    kjit::ops::layer_norm(runtime(), p, x, residual, y, sum, weight, bias, o,
                          static_cast<CUstream>(stream));
  });
}

int kjit_layer_norm_prepare(const char* kind, const char* dtype, const char* param_dtype,
                            int64_t rows, int64_t width, int activation, int residual, int weight,
                            int bias, int autotune, const char* config, char* buf, int64_t size) {
  return guarded([&] {
    const auto p = ln_problem(kind, dtype, param_dtype, rows, width, activation, residual != 0,
                              weight != 0, bias != 0);
    kjit::ops::validate(p);
    check_buffer(buf, size);
    // The options kjit_layer_norm calls with, so that it finds these plans (the eps does not
    // choose a plan).
    const auto o = ln_options(kjit::ops::LayerNormOptions{}.eps, autotune, config);
    copy_text(kjit::ops::prepare_layer_norm(runtime(), p, o).describe(), buf, size);
  });
}

int kjit_layer_norm_reserve_workspace(const char* kind, const char* dtype, const char* param_dtype,
                                      int64_t rows, int64_t width, int activation, int residual,
                                      int weight, int bias, int autotune, const char* config,
                                      void* stream, int64_t* bytes) {
  return guarded([&] {
    const auto p = ln_problem(kind, dtype, param_dtype, rows, width, activation, residual != 0,
                              weight != 0, bias != 0);
    kjit::ops::validate(p);
    const auto o = ln_options(kjit::ops::LayerNormOptions{}.eps, autotune, config);
    const size_t b =
        kjit::ops::reserve_layer_norm_workspace(runtime(), p, o, static_cast<CUstream>(stream));
    if (bytes) *bytes = static_cast<int64_t>(b);
  });
}

}  // extern "C"
