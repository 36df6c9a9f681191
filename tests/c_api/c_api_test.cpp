// The C ABI without a GPU: a bad argument is reported as invalid_argument (code 1) with a message
// naming it, before the runtime (and so the driver) is needed; a good one reaches the driver.
#include <doctest/doctest.h>

#include <string>

#include "kjit/c_api.h"

namespace {

constexpr int kInvalidArgument = KJIT_ERR_INVALID_ARGUMENT;

bool last_error_has(const char* text) {
  return std::string(kjit_last_error()).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("kjit_group_norm: bad arguments are invalid_argument, named, before any device use") {
  alignas(16) static float buf[1024];
  auto call = [&](const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s, int64_t g,
                  const void* x, void* y, float eps) {
    return kjit_group_norm(dtype, layout, n, c, s, g, 1, x, y, nullptr, nullptr, eps, nullptr, 0,
                           nullptr);
  };
  CHECK(call("f32", "nchw", 2, 8, 4, 0, buf, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("groups = 0"));
  CHECK(call("f32", "nchw", -1, 8, 4, 2, buf, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("N = -1"));
  CHECK(call("f32", "nchw", 2, 8, 4, 3, buf, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("divisible"));
  CHECK(call("f32", "nchw", 2, 8, 4, 2, nullptr, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("x is null"));
  CHECK(call("f32", "nchw", 2, 8, 4, 2, buf, buf + 512, -1.f) == kInvalidArgument);
  CHECK(last_error_has("eps"));
  CHECK(call(nullptr, "nchw", 2, 8, 4, 2, buf, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("dtype is NULL"));
  CHECK(call("f32", "NCHW", 2, 8, 4, 2, buf, buf + 512, 1e-5f) == kInvalidArgument);
  CHECK(last_error_has("layout 'NCHW'"));
  char text[64];
  CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 5, 1, 1, 0, nullptr, text, 64) ==
        kInvalidArgument);
  CHECK(last_error_has("divisible"));
  // A valid problem gets past validation: prepare then fails only for want of a driver (or, on
  // a machine with a GPU, compiles). No call with these host buffers is ever enqueued.
  CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, text, 64) !=
        kInvalidArgument);
  int64_t bytes = -1;
  CHECK(kjit_group_norm_reserve_workspace("f32", "nhwc", 2, 8, 4, 3, 1, 1, 0, nullptr, nullptr,
                                          &bytes) == kInvalidArgument);
  CHECK(last_error_has("divisible"));
  CHECK(bytes == -1);  // untouched on failure
  CHECK(kjit_group_norm_reserve_workspace("bf8", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, nullptr,
                                          &bytes) == kInvalidArgument);
  CHECK(last_error_has("bf8"));
}

TEST_CASE("kjit_linear_gn_min: bad arguments are invalid_argument, named, before any device use") {
  alignas(16) static float buf[1024];
  auto call = [&](const char* precision, int64_t m, int64_t k, int64_t n, int64_t g,
                  const float* gamma) {
    return kjit_linear_gn_min(precision, m, k, n, g, buf, buf + 64, buf + 128, gamma, buf + 192,
                              buf + 256, buf + 512, 1e-5f, nullptr, 0, nullptr);
  };
  CHECK(call("fp32", -5, 8, 8, 2, buf + 160) == kInvalidArgument);
  CHECK(last_error_has("M = -5"));
  CHECK(call("fp64", 4, 8, 8, 2, buf + 160) == kInvalidArgument);
  CHECK(last_error_has("fp64"));
  CHECK(call(nullptr, 4, 8, 8, 2, buf + 160) == kInvalidArgument);
  CHECK(last_error_has("precision is NULL"));
  CHECK(call("fp32", 4, 8, 8, 2, nullptr) == kInvalidArgument);
  CHECK(last_error_has("gamma is null"));
  char text[64];
  CHECK(kjit_linear_gn_min_prepare("fp32", 4, 8, 8, 3, 0, nullptr, text, 64) == kInvalidArgument);
  CHECK(kjit_linear_gn_min_reserve_workspace("fp32", 4, 8, 8, 3, nullptr) == kInvalidArgument);
  CHECK(last_error_has("divisible"));
  CHECK(kjit_linear_gn_min_reserve_workspace(nullptr, 4, 8, 8, 2, nullptr) == kInvalidArgument);
  CHECK(last_error_has("precision is NULL"));
}

TEST_CASE("kjit_linear_gn_min_prepack / _packed: bad arguments are invalid_argument, named") {
  alignas(16) static float buf[1024];
  kjit_linear_gn_min_pack* pack = reinterpret_cast<kjit_linear_gn_min_pack*>(buf);
  CHECK(kjit_linear_gn_min_prepack("fp32", 8, 8, buf, nullptr, &pack) == kInvalidArgument);
  CHECK(last_error_has("only fp32x3 has a prepacked form"));
  CHECK(pack == nullptr);  // set to NULL on error
  CHECK(kjit_linear_gn_min_prepack("fp32x3", 8, 8, nullptr, nullptr, &pack) == kInvalidArgument);
  CHECK(last_error_has("weight is null"));
  CHECK(kjit_linear_gn_min_prepack(
            "fp32x3", 8, 8, reinterpret_cast<const float*>(reinterpret_cast<const char*>(buf) + 2),
            nullptr, &pack) == kInvalidArgument);
  CHECK(kjit_linear_gn_min_prepack("fp32x3", 0, 8, buf, nullptr, &pack) == kInvalidArgument);
  CHECK(last_error_has("N = 0"));
  CHECK(kjit_linear_gn_min_prepack("fp32x3", 8, 8, buf, nullptr, nullptr) == kInvalidArgument);
  CHECK(last_error_has("pack must not be NULL"));
  CHECK(kjit_linear_gn_min_packed("fp32x3", 4, 8, 8, 2, buf, nullptr, buf + 128, buf + 160,
                                  buf + 192, buf + 256, buf + 512, 1e-5f, nullptr, 0,
                                  nullptr) == kInvalidArgument);
  CHECK(last_error_has("pack must not be NULL"));
  CHECK(kjit_linear_gn_min_packed("fp32x3", 4, 8, 8, 3, buf, nullptr, buf + 128, buf + 160,
                                  buf + 192, buf + 256, buf + 512, 1e-5f, nullptr, 0,
                                  nullptr) == kInvalidArgument);
  CHECK(last_error_has("divisible"));
  CHECK(kjit_linear_gn_min_pack_free(nullptr) == KJIT_OK);
  // A handle prepack never made (as a freed one is): refused, never read or deleted.
  auto* fake = reinterpret_cast<kjit_linear_gn_min_pack*>(buf);
  CHECK(kjit_linear_gn_min_pack_free(fake) == kInvalidArgument);
  CHECK(last_error_has("pack is not a live pack of kjit_linear_gn_min_prepack"));
  CHECK(kjit_linear_gn_min_packed("fp32x3", 4, 8, 8, 2, buf, fake, buf + 128, buf + 160, buf + 192,
                                  buf + 256, buf + 512, 1e-5f, nullptr, 0,
                                  nullptr) == kInvalidArgument);
  CHECK(last_error_has("pack is not a live pack"));
}

// The activation is a KJIT_ACTIVATION_ constant: 0 and 1 are the former silu flag's values, the
// others select GELU and ReLU, and an unknown number is refused by name before any device use.
TEST_CASE("kjit_group_norm: the activation constants; an unknown one is named") {
  CHECK(KJIT_ACTIVATION_NONE == 0);
  CHECK(KJIT_ACTIVATION_SILU == 1);
  CHECK(KJIT_ACTIVATION_GELU_TANH == 2);
  CHECK(KJIT_ACTIVATION_GELU == 3);
  CHECK(KJIT_ACTIVATION_RELU == 4);
  alignas(16) static float buf[1024];
  for (int bad : {-1, 5, 1000}) {
    CAPTURE(bad);
    CHECK(kjit_group_norm("f32", "nchw", 2, 8, 4, 2, bad, buf, buf + 512, nullptr, nullptr, 1e-5f,
                          nullptr, 0, nullptr) == kInvalidArgument);
    CHECK(last_error_has(("activation = " + std::to_string(bad)).c_str()));
    CHECK(last_error_has("KJIT_ACTIVATION_"));
    char text[64];
    CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, bad, 1, 0, nullptr, text, 64) ==
          kInvalidArgument);
    CHECK(last_error_has(("activation = " + std::to_string(bad)).c_str()));
    int64_t bytes = -1;
    CHECK(kjit_group_norm_reserve_workspace("f32", "nchw", 2, 8, 4, 2, bad, 1, 0, nullptr, nullptr,
                                            &bytes) == kInvalidArgument);
    CHECK(bytes == -1);
  }
  // Each constant gets past validation: prepare fails only for want of a driver (or compiles).
  for (int a : {KJIT_ACTIVATION_NONE, KJIT_ACTIVATION_SILU, KJIT_ACTIVATION_GELU_TANH,
                KJIT_ACTIVATION_GELU, KJIT_ACTIVATION_RELU}) {
    CAPTURE(a);
    char text[128];
    CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, a, 1, 0, nullptr, text, 128) !=
          kInvalidArgument);
  }
}

// A prepare that gets a buffer checks its size first (a caller must never read an untouched
// buffer as the answer); the codes are the header's.
TEST_CASE("prepare: a buffer needs a positive size; the codes are named in the header") {
  char text[8] = "unset";
  CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, text, 0) ==
        kInvalidArgument);
  CHECK(last_error_has("size = 0 must be > 0 when buf is not NULL"));
  CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, text, -1) ==
        kInvalidArgument);
  CHECK(kjit_linear_gn_min_prepare("fp32", 4, 8, 8, 2, 0, nullptr, text, 0) == kInvalidArgument);
  CHECK(last_error_has("size = 0"));
  CHECK(std::string(text) == "unset");
  // No buffer at all is fine: the plan is built, the text dropped (here: no driver, or a GPU).
  const int rc = kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, nullptr, 0);
  CHECK(rc != kInvalidArgument);
  CHECK((rc == KJIT_OK || rc == KJIT_ERR_NO_DRIVER || rc == KJIT_ERR_NO_DEVICE));
  CHECK(KJIT_ERR_IO == 11);
  CHECK(KJIT_ERR_INTERNAL == 1000);
}

// Operands the kernels would read while other threads write y (GroupNorm's weight and bias), a
// sum nobody will write (LayerNorm without a residual), and ranges that wrap past 2^64: refused
// before any device use.
TEST_CASE("kjit_group_norm / kjit_layer_norm: overlapping or unused operands are refused") {
  alignas(16) static float buf[1024];
  // x [2, 8, 4] = 64 floats at buf, y at buf + 512; weight and bias [8].
  CHECK(kjit_group_norm("f32", "nchw", 2, 8, 4, 2, 1, buf, buf + 512, buf + 520, nullptr, 1e-5f,
                        nullptr, 0, nullptr) == kInvalidArgument);
  CHECK(last_error_has("y and weight overlap"));
  CHECK(kjit_group_norm("f32", "nchw", 2, 8, 4, 2, 1, buf, buf + 512, buf + 256, buf + 575, 1e-5f,
                        nullptr, 0, nullptr) == kInvalidArgument);
  CHECK(last_error_has("y and bias overlap"));
  // Disjoint: on to the driver, which only a machine without a GPU may reach: with one, the kernel
  // would read these host arrays, an illegal address that fails every later call of the process
  // (the H200 machine: the next prepare's cuModuleLoadData gave CUDA_ERROR_ILLEGAL_ADDRESS).
  const int probe =
      kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, nullptr, nullptr, 0);
  if (probe == KJIT_ERR_NO_DRIVER || probe == KJIT_ERR_NO_DEVICE)
    CHECK(kjit_group_norm("f32", "nchw", 2, 8, 4, 2, 1, buf, buf + 512, buf + 256, buf + 576, 1e-5f,
                          nullptr, 0, nullptr) != kInvalidArgument);
  CHECK(kjit_layer_norm("layer_norm", "f32", nullptr, 4, 16, 0, buf, nullptr, buf + 512, buf + 256,
                        nullptr, nullptr, 1e-5f, nullptr, 0, nullptr) == kInvalidArgument);
  CHECK(last_error_has("sum is given without a residual"));
  // y's range ends past 2^64: refused, rather than wrapping around to look disjoint from x.
  const auto wrapped = reinterpret_cast<void*>(~uintptr_t{0} - 63);
  CHECK(kjit_layer_norm("rms_norm", "f32", nullptr, 4, 16, 0, reinterpret_cast<void*>(0x100),
                        nullptr, wrapped, nullptr, nullptr, nullptr, 1e-5f, nullptr, 0,
                        nullptr) == kInvalidArgument);
  CHECK(last_error_has("y (256 bytes) ends past the top of the address space"));
}

// kjit_layer_norm_prepare checks what kjit_layer_norm checks of the problem, and its buffer,
// before the runtime; a valid problem gets past validation (no driver here, or it compiles).
TEST_CASE(
    "kjit_layer_norm_prepare: bad arguments are invalid_argument, named, before any device use") {
  char text[128] = "unset";
  auto prep = [&](const char* kind, const char* dtype, const char* param_dtype, int64_t rows,
                  int64_t width, int activation, int bias, int64_t size) {
    return kjit_layer_norm_prepare(kind, dtype, param_dtype, rows, width, activation, 1, 1, bias, 0,
                                   nullptr, text, size);
  };
  struct Bad {
    const char *kind, *dtype;
    int64_t width;
    int activation, bias;
    int64_t size;
    const char* named;
  };
  for (const Bad& c : {Bad{nullptr, "f32", 64, 0, 0, 128, "kind is NULL"},
                       Bad{"batch_norm", "f32", 64, 0, 0, 128, "norm kind 'batch_norm'"},
                       Bad{"layer_norm", "f64", 64, 0, 0, 128, "f64"},
                       Bad{"layer_norm", "f32", 64, 9, 0, 128, "activation = 9"},
                       Bad{"rms_norm", "bf16", 64, 0, 1, 128, "RMSNorm has no bias"},
                       Bad{"layer_norm", "f32", 0, 0, 0, 128, "width = 0"},
                       Bad{"layer_norm", "f32", 64, 0, 0, 0, "must be > 0"}}) {
    CAPTURE(c.named);
    CHECK(prep(c.kind, c.dtype, nullptr, 4, c.width, c.activation, c.bias, c.size) ==
          kInvalidArgument);
    CHECK(last_error_has(c.named));
  }
  CHECK(std::string(text) == "unset");
  const int rc = prep("rms_norm", "bf16", "f32", 4, 64, KJIT_ACTIVATION_SILU, 0, 128);
  CAPTURE(std::string(kjit_last_error()));  // an error's words, on a GPU machine
  CHECK(rc != kInvalidArgument);
  CHECK((rc == KJIT_OK || rc == KJIT_ERR_NO_DRIVER || rc == KJIT_ERR_NO_DEVICE));
}

// kjit_layer_norm_reserve_workspace checks the problem and the config as prepare does, before
// the runtime; a valid one gets past (no driver here; on a GPU a row of 2^20 reserves the float4
// per CTA and the two barrier words of its cooperative plan, a short row nothing).
TEST_CASE("kjit_layer_norm_reserve_workspace: bad arguments are invalid_argument, named") {
  int64_t bytes = -1;
  CHECK(kjit_layer_norm_reserve_workspace("rms_norm", "f32", nullptr, 1, 1 << 20, 0, 0, 1, 1, 0,
                                          nullptr, nullptr, &bytes) == kInvalidArgument);
  CHECK(last_error_has("RMSNorm has no bias"));
  CHECK(kjit_layer_norm_reserve_workspace("layer_norm", "f32", nullptr, -1, 64, 0, 0, 1, 1, 0,
                                          nullptr, nullptr, &bytes) == kInvalidArgument);
  CHECK(last_error_has("rows = -1"));
  CHECK(kjit_layer_norm_reserve_workspace("layer_norm", "f32", nullptr, 1, 1 << 20, 0, 0, 1, 1, 0,
                                          "threads=512 team=512 vec=4 iters=4 cluster=1 coop=0",
                                          nullptr, &bytes) == kInvalidArgument);
  CHECK(last_error_has("coop = 0 must be in [1, 1024]"));
  CHECK(bytes == -1);
  for (int64_t width : {int64_t{1} << 20, int64_t{64}}) {
    const int rc = kjit_layer_norm_reserve_workspace("layer_norm", "f32", nullptr, 1, width, 0, 0,
                                                     1, 1, 0, nullptr, nullptr, &bytes);
    CAPTURE(std::string(kjit_last_error()));
    CHECK((rc == KJIT_OK || rc == KJIT_ERR_NO_DRIVER || rc == KJIT_ERR_NO_DEVICE));
    if (rc == KJIT_OK) CHECK((width == 64 ? bytes == 0 : bytes > 0));
  }
}

// config: a text that is no config of the op is refused, naming the word, by every call and
// prepare before the runtime; a config's text gets past (no driver here, or it compiles).
TEST_CASE(
    "config: a text that is no config of the op is invalid_argument, named, before any "
    "device use") {
  alignas(16) static float buf[1024];
  char text[128] = "unset";
  const char* ln_bad = "threads=256 team=32 vec=4 iters=1 clusters=1";
  CHECK(kjit_layer_norm("layer_norm", "f32", nullptr, 4, 16, 0, buf, nullptr, buf + 512, nullptr,
                        nullptr, nullptr, 1e-5f, nullptr, 0, ln_bad) == kInvalidArgument);
  CHECK(last_error_has("layer_norm config: cluster=<integer> is missing"));
  CHECK(kjit_layer_norm_prepare("rms_norm", "f32", nullptr, 4, 16, 0, 0, 1, 0, 1, "", text, 128) ==
        kInvalidArgument);
  CHECK(last_error_has("layer_norm config: the text is empty"));
  const char* gn_bad = "threads=256 team=256 vec=4 iters=4 cluster=1 stream split";
  CHECK(kjit_group_norm("f32", "nchw", 2, 8, 4, 2, 1, buf, buf + 512, nullptr, nullptr, 1e-5f,
                        nullptr, 0, gn_bad) == kInvalidArgument);
  CHECK(last_error_has("group_norm config: the words \"stream split\" name no family"));
  CHECK(kjit_group_norm_prepare("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, gn_bad, text, 128) ==
        kInvalidArgument);
  CHECK(last_error_has("name no family"));
  int64_t bytes = -1;
  CHECK(kjit_group_norm_reserve_workspace("f32", "nchw", 2, 8, 4, 2, 1, 1, 0, "threads=x", nullptr,
                                          &bytes) == kInvalidArgument);
  CHECK(last_error_has("\"threads=x\": the value must be a decimal integer"));
  CHECK(bytes == -1);
  const char* lgm_bad = "threads=256 slice=32 sub=4 seq=2 vec=4 smem";
  CHECK(kjit_linear_gn_min("fp32", 4, 8, 8, 2, buf, buf + 64, buf + 128, buf + 160, buf + 192,
                           buf + 256, buf + 512, 1e-5f, nullptr, 0, lgm_bad) == kInvalidArgument);
  CHECK(last_error_has("linear_gn_min config: unknown word \"smem\""));
  CHECK(kjit_linear_gn_min_prepare("fp32", 4, 8, 8, 2, 1, lgm_bad, text, 128) == kInvalidArgument);
  CHECK(last_error_has("unknown word \"smem\""));
  // The packed call reads its config before the pack (NULL here) is looked at.
  CHECK(kjit_linear_gn_min_packed("fp32x3", 4, 8, 8, 2, buf, nullptr, buf + 128, buf + 160,
                                  buf + 192, buf + 256, buf + 512, 1e-5f, nullptr, 0,
                                  lgm_bad) == kInvalidArgument);
  CHECK(last_error_has("unknown word \"smem\""));
  // Linear-GN-min's text may name the GEMM after the config, by its own rules; a prepare's
  // report past "; kernel" is no pin.
  const char* lgm_gemm_bad = "threads=256 slice=32 sub=4 seq=2 vec=4; GEMM id=21 tile=20";
  CHECK(kjit_linear_gn_min_prepare("fp32", 4, 8, 8, 2, 0, lgm_gemm_bad, text, 128) ==
        kInvalidArgument);
  CHECK(last_error_has("stages=<integer> is missing"));
  const char* lgm_report =
      "threads=256 slice=32 sub=4 seq=2 vec=4; GEMM id=21 tile=20 stages=8 splitk=1 reduction=0 "
      "swizzle=0 cluster=0; kernel kjit::gn_min<...>; GEMM from heuristic";
  CHECK(kjit_linear_gn_min("fp32", 4, 8, 8, 2, buf, buf + 64, buf + 128, buf + 160, buf + 192,
                           buf + 256, buf + 512, 1e-5f, nullptr, 0,
                           lgm_report) == kInvalidArgument);
  CHECK(last_error_has("is its report, not a pin"));
  CHECK(std::string(text) == "unset");
  // A config's text gets past validation: prepare reaches the runtime (no driver here; on a GPU
  // machine it compiles, or refuses a config that cannot run the problem, naming config).
  const int rc = kjit_layer_norm_prepare("layer_norm", "f32", nullptr, 4, 256, 0, 0, 1, 1, 0,
                                         "threads=256 team=32 vec=4 iters=2 cluster=1", text, 128);
  CAPTURE(std::string(kjit_last_error()));
  CHECK((rc == KJIT_OK || rc == KJIT_ERR_NO_DRIVER || rc == KJIT_ERR_NO_DEVICE));
}
