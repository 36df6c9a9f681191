/* kjit's C ABI: for Python (ctypes) and other FFI callers. One process-wide runtime on the
 * device KJIT_DEVICE (default 0), created on first use. Every function returns 0 on success or
 * a nonzero kjit error code (Errc + 1; 1000 for an unexpected exception), with the message in
 * kjit_last_error() (per thread). Arguments are checked before the runtime is created: a bad one
 * gives 1 (invalid_argument) naming it, even without a driver. */
#ifndef KJIT_C_API_H
#define KJIT_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const char* kjit_last_error(void);
const char* kjit_version(void);

/* dtype: "f32" | "f16" | "bf16" (params use the same dtype); layout: "nchw" | "nhwc".
 * weight/bias may be NULL (no affine). stream: a CUstream / cudaStream_t (NULL = legacy). */
int kjit_group_norm(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                    int64_t groups, int silu, const void* x, void* y, const void* weight,
                    const void* bias, float eps, void* stream, int autotune);

/* Compile and load ahead (so a later call inside a graph capture compiles nothing). Writes the
 * chosen config as text into buf (size bytes). */
int kjit_group_norm_prepare(const char* dtype, const char* layout, int64_t n, int64_t c, int64_t s,
                            int64_t groups, int silu, int affine, int autotune, char* buf,
                            int64_t size);

/* Give `stream` the workspaces a split, coop or pipe plan of this problem uses (see docs/API.md;
 * coop and pipe plans also need barrier words), so that a graph captured on it without a call beforehand runs
 * those kernels rather than the one-kernel fallback. Writes their size in bytes to *bytes when
 * not NULL (0: the plan needs no workspace). */
int kjit_group_norm_reserve_workspace(const char* dtype, const char* layout, int64_t n, int64_t c,
                                      int64_t s, int64_t groups, int silu, int affine,
                                      int autotune, void* stream, int64_t* bytes);

/* Linear -> GroupNorm -> min -> + bias. precision: "fp32" | "tf32" | "bf16-inputs" (x, weight
 * bf16). out: [1, n, m, 1] contiguous, out[c*m + r] = min_r + bias[c]. Workspace: kjit's own,
 * one per stream. */
int kjit_linear_gn_min(const char* precision, int64_t m, int64_t k, int64_t n, int64_t groups,
                       const void* x, const void* weight, const float* linear_bias,
                       const float* gamma, const float* beta, const float* bias, float* out,
                       float eps, void* stream, int autotune);
int kjit_linear_gn_min_prepare(const char* precision, int64_t m, int64_t k, int64_t n,
                               int64_t groups, int autotune, char* buf, int64_t size);
/* Allocate kjit's workspace for `stream` ahead (a call captured into a graph on a stream without
 * one is refused with capture_compile). */
int kjit_linear_gn_min_reserve_workspace(const char* precision, int64_t m, int64_t k, int64_t n,
                                         int64_t groups, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_C_API_H */
