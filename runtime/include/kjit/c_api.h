/* kjit's C ABI: for Python (ctypes) and other FFI callers. One process-wide runtime on the
 * device KJIT_DEVICE (default 0), created on first use. Every function returns KJIT_OK (0) on
 * success or one of the KJIT_ERR_ codes below, with the message in kjit_last_error() (per
 * thread, valid until that thread's next kjit call). Arguments are checked before the runtime is
 * created: a bad one gives KJIT_ERR_INVALID_ARGUMENT naming it, even without a driver. */
#ifndef KJIT_C_API_H
#define KJIT_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes: kjit::Errc + 1, and KJIT_ERR_INTERNAL for an unexpected exception. */
enum {
  KJIT_OK = 0,
  KJIT_ERR_INVALID_ARGUMENT = 1, /* a value breaks a documented rule */
  KJIT_ERR_NO_DRIVER = 2,        /* libcuda.so.1 missing or not initialized */
  KJIT_ERR_NO_DEVICE = 3,        /* no usable device (or KJIT_DEVICE out of range) */
  KJIT_ERR_CUDA = 4,             /* a CUDA driver call failed */
  KJIT_ERR_NVRTC = 5,            /* NVRTC itself failed */
  KJIT_ERR_COMPILE = 6,          /* a kernel did not compile */
  KJIT_ERR_CUBLAS = 7,           /* a cuBLASLt call failed */
  KJIT_ERR_UNSUPPORTED = 8,      /* valid, but the device or toolkit cannot serve it */
  KJIT_ERR_CAPTURE_COMPILE = 9,  /* would compile or allocate inside a graph capture */
  KJIT_ERR_NOT_FOUND = 10,       /* unknown template, op or entry */
  KJIT_ERR_IO = 11,              /* a file could not be read or written */
  KJIT_ERR_INTERNAL = 1000       /* an unexpected exception */
};

/* The activation after the normalization (kjit::Activation; docs/OPS.md has the formulas). 0 and 1
 * mean what the former `silu` flag's 0 and 1 did; a value outside these constants is
 * KJIT_ERR_INVALID_ARGUMENT naming it. */
enum {
  KJIT_ACTIVATION_NONE = 0,
  KJIT_ACTIVATION_SILU = 1,      /* F.silu */
  KJIT_ACTIVATION_GELU_TANH = 2, /* F.gelu(approximate="tanh") */
  KJIT_ACTIVATION_GELU = 3,      /* F.gelu (erf) */
  KJIT_ACTIVATION_RELU = 4       /* F.relu */
};

const char* kjit_last_error(void);
const char* kjit_version(void);

/* autotune and config, in every call and prepare: autotune nonzero times the op's candidates once
 * per problem (stored in the disk cache, reused by later processes without timing; also under
 * KJIT_AUTOTUNE=1). config NULL: the heuristic's config, or autotuning's; else a config's text as
 * the prepare functions write it (for Linear-GN-min, the text before "; kernel") or kjit-bench
 * --sweep lists it ("threads=256 team=256 vec=4 iters=4 cluster=16 replicas=4"; docs/OPS.md),
 * pinned: it wins over autotune. A text that is no config of the op is KJIT_ERR_INVALID_ARGUMENT
 * naming the word and the rule; a config that cannot run the problem is one naming the config,
 * its field and the rule. A call finds the plan a prepare built only when both pass the same
 * autotune and config. */

/* dtype: "f32" | "f16" | "bf16" (params use the same dtype); layout: "nchw" | "nhwc";
 * activation: one of KJIT_ACTIVATION_*.
 * weight/bias may be NULL (no affine). stream: a CUstream / cudaStream_t (NULL = legacy). */
int kjit_group_norm(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                    int64_t groups, int activation, const void* x, void* y, const void* weight,
                    const void* bias, float eps, void* stream, int autotune, const char* config);

/* Compile and load ahead (so a later call inside a graph capture compiles nothing). Writes the
 * chosen config as text into buf when buf is not NULL: size must then be > 0, and a buf too small
 * for the text is KJIT_ERR_INVALID_ARGUMENT naming the size needed (nothing is written). */
int kjit_group_norm_prepare(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                            int64_t groups, int activation, int affine, int autotune,
                            const char* config, char* buf, int64_t size);

/* Give `stream` the workspaces a split, coop or pipe plan of this problem uses (see docs/API.md;
 * coop and pipe plans also need barrier words), so that a graph captured on it without a call
 * beforehand runs those kernels rather than the one-kernel fallback. Writes their size in bytes to
 * *bytes when not NULL (0: the plan needs no workspace). */
int kjit_group_norm_reserve_workspace(const char* dtype, const char* layout, int64_t n, int64_t c,
                                      int64_t s, int64_t groups, int activation, int affine,
                                      int autotune, const char* config, void* stream,
                                      int64_t* bytes);

/* Linear -> GroupNorm -> min -> + bias. precision: "fp32" | "tf32" | "bf16-inputs" (x, weight
 * bf16) | "fp32x3" (split precision on FP16 tensor cores: strict-FP32-class accuracy; W split on
 * every call, or once with kjit_linear_gn_min_prepack). out: [1, n, m, 1] contiguous, out[c*m + r]
 * = min_r + bias[c]. Workspace: kjit's own, one per stream. */
int kjit_linear_gn_min(const char* precision, int64_t m, int64_t k, int64_t n, int64_t groups,
                       const void* x, const void* weight, const float* linear_bias,
                       const float* gamma, const float* beta, const float* bias, float* out,
                       float eps, void* stream, int autotune, const char* config);
/* As kjit_group_norm_prepare: the plan chosen, as text into buf: the fused kernel's config, then
 * "; GEMM " and cuBLASLt's algorithm (that much is what config takes back to pin both; the
 * config alone pins the kernel and leaves the GEMM to the heuristic or autotuning), then
 * "; kernel " and its instantiation and "; GEMM from " where the algorithm came from. */
int kjit_linear_gn_min_prepare(const char* precision, int64_t m, int64_t k, int64_t n,
                               int64_t groups, int autotune, const char* config, char* buf,
                               int64_t size);
/* Allocate kjit's workspace for `stream` ahead (a call captured into a graph on a stream without
 * one is refused with capture_compile). */
int kjit_linear_gn_min_reserve_workspace(const char* precision, int64_t m, int64_t k, int64_t n,
                                         int64_t groups, void* stream);

/* A weight prepacked once for precision "fp32x3" (W [n, k] fp32 scaled and split into fp16 hi and
 * lo, kjit::ops::LinearGnMinWeights), owned by the caller: free it with
 * kjit_linear_gn_min_pack_free. The split is enqueued on `stream` (other streams must wait for it).
 * The pack records n, k and the precision: a kjit_linear_gn_min_packed call for another problem is
 * KJIT_ERR_INVALID_ARGUMENT naming both. On error *pack is set to NULL. */
typedef struct kjit_linear_gn_min_pack kjit_linear_gn_min_pack;
int kjit_linear_gn_min_prepack(const char* precision, int64_t n, int64_t k, const float* weight,
                               void* stream, kjit_linear_gn_min_pack** pack);
/* Frees the pack (NULL: nothing); its memory may still be read by queued calls: synchronize
 * their streams first. A pack freed already (or any handle prepack did not return) is
 * KJIT_ERR_INVALID_ARGUMENT here and in kjit_linear_gn_min_packed, never undefined behaviour; a
 * free while another thread's kjit_linear_gn_min_packed is using the pack is the caller's race,
 * as with any handle. */
int kjit_linear_gn_min_pack_free(kjit_linear_gn_min_pack* pack);
/* kjit_linear_gn_min with a prepacked weight instead of the weight pointer. */
int kjit_linear_gn_min_packed(const char* precision, int64_t m, int64_t k, int64_t n,
                              int64_t groups, const void* x, const kjit_linear_gn_min_pack* pack,
                              const float* linear_bias, const float* gamma, const float* beta,
                              const float* bias, float* out, float eps, void* stream, int autotune,
                              const char* config);

/* LayerNorm or RMSNorm over the last dimension of x [rows, width], row-major (docs/OPS.md).
 * kind: "layer_norm" | "rms_norm"; dtype: "f32" | "f16" | "bf16" (x, residual, y, sum);
 * param_dtype: NULL (the dtype) or "f32"; activation: one of KJIT_ACTIVATION_*. residual NULL:
 * y = act(norm(x)); else sum = x + residual (in dtype) is written to sum and y = act(norm(sum)).
 * weight, bias: [width] or NULL (none; rms_norm takes no bias). autotune nonzero: time the
 * candidates once per problem, as kjit_group_norm's; config as above. */
int kjit_layer_norm(const char* kind, const char* dtype, const char* param_dtype, int64_t rows,
                    int64_t width, int activation, const void* x, const void* residual, void* y,
                    void* sum, const void* weight, const void* bias, float eps, void* stream,
                    int autotune, const char* config);
/* Compile and load what kjit_layer_norm of this problem launches with 16-byte aligned pointers
 * (any width), in place or not, so that such a call, also inside a graph capture, compiles
 * nothing. residual, weight, bias: nonzero when the call passes them; autotune and config: as
 * the call will pass them (a tuned call finds the plan that a tuned prepare built). Writes the
 * chosen config
 * as text into buf as kjit_group_norm_prepare does. */
int kjit_layer_norm_prepare(const char* kind, const char* dtype, const char* param_dtype,
                            int64_t rows, int64_t width, int activation, int residual, int weight,
                            int bias, int autotune, const char* config, char* buf, int64_t size);
/* Give `stream` the workspace a cooperative plan of this problem (a config with coop > 1: few
 * rows too long for a cluster) uses, as kjit_group_norm_reserve_workspace does; without it a
 * call captured on that stream runs the plan's fallback (or, for a pinned coop config, fails
 * with capture_compile). Arguments as kjit_layer_norm_prepare's; writes the bytes reserved to
 * *bytes when not NULL (0: the plan needs no workspace). */
int kjit_layer_norm_reserve_workspace(const char* kind, const char* dtype, const char* param_dtype,
                                      int64_t rows, int64_t width, int activation, int residual,
                                      int weight, int bias, int autotune, const char* config,
                                      void* stream, int64_t* bytes);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_C_API_H */
