// Linear-GN-min's split precision (Precision::Fp32x3): the weight pack (prepack, its checks) and
// the split kernel (kernel_templates/kjit/f16_split.cuh) that turns x, or W without a pack, into
// the scaled fp16 [lo | hi] / [hi | lo] rows the two FP16 GEMMs read (linear_gn_min_plan.hpp,
// LgmGemm) and the rows' exponents the fused kernel undoes.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "ops/linear_gn_min_plan.hpp"

namespace kjit::ops {

namespace {

std::string context_text(CUcontext c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", static_cast<void*>(c));
  return buf;
}

// The problem the pack's checks name: N, K, precision (M and G do not shape a pack).
std::string pack_text(int64_t N, int64_t K, Precision pr) {
  return "N=" + std::to_string(N) + " K=" + std::to_string(K) + " " + precision_name(pr);
}

// The problem a pack's sizes are checked as: M and G do not shape a pack.
LinearGnMinProblem pack_problem(int64_t N, int64_t K, Precision precision) {
  LinearGnMinProblem p;
  p.M = 1;
  p.K = K;
  p.N = N;
  p.G = 1;
  p.precision = precision;
  return p;
}

}  // namespace

std::string LinearGnMinWeights::describe() const {
  if (empty()) return "empty weight pack";
  return pack_text(N_, K_, precision_) + " on device " + std::to_string(device_) + " (context " +
         context_text(ctx_) + ")";
}

void validate_pack(const LinearGnMinProblem& p, const LinearGnMinWeights& w, CUcontext context) {
  if (w.empty())
    op::invalid("linear_gn_min", "weight",
                "the weight pack is empty (default-constructed or moved from)", p.describe());
  if (w.N() != p.N || w.K() != p.K || w.precision() != p.precision)
    op::invalid("linear_gn_min", "weight",
                "the weight pack was made for " + pack_text(w.N(), w.K(), w.precision()) +
                    ", not for this problem's " + pack_text(p.N, p.K, p.precision) +
                    " (prepack_linear_gn_min again for this problem)",
                p.describe());
  if (w.context() != context)
    op::invalid("linear_gn_min", "weight",
                "the weight pack (" + w.describe() +
                    ") was made in another CUDA context than this runtime's (context " +
                    context_text(context) + ")",
                p.describe());
}

namespace detail {

void build_split_kernel(Runtime& rt, const LinearGnMinProblem& p, int64_t rows, int64_t align,
                        Kernel* k, LaunchConfig* launch) {
  const int vec = align >= 16 && p.K % 4 == 0 ? 4 : 1;
  *k = rt.kernel(split_spec(p.K, vec));
  // A CTA per row at a time (its scale needs the whole row): enough CTAs to fill the device a
  // few times over, each walking rows at a stride of the grid.
  const int64_t most = int64_t{16} * std::max(1, rt.props().sm_count);
  launch->grid.x = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, most));
  launch->block.x = kSplitThreads;
  // No programmatic launch: the split overwrites rows the previous call's GEMM may still read.
  launch->programmatic = false;
}

void launch_split(const Kernel& k, const LaunchConfig& launch, const void* src, CUdeviceptr dst,
                  CUdeviceptr exps, long long rows, int64_t pitch, bool lo_first, CUstream stream) {
  const auto* s = static_cast<const float*>(src);
  auto* d = reinterpret_cast<uint16_t*>(dst);  // kjit::half in the kernel: 2 bytes, a pointer
  auto* e = reinterpret_cast<int*>(exps);
  const long long hi_off = lo_first ? pitch : 0, lo_off = lo_first ? 0 : pitch;
  k(stream, launch, s, d, e, rows, hi_off, lo_off);
}

}  // namespace detail

void validate_prepack(int64_t N, int64_t K, Precision precision, const float* weight) {
  validate(pack_problem(N, K, precision));
  auto ctx = [&] { return pack_text(N, K, precision); };
  if (precision != Precision::Fp32x3)
    op::invalid("prepack_linear_gn_min", "precision",
                std::string("precision ") + precision_name(precision) +
                    " uses the weight as it is: only fp32x3 has a prepacked form",
                ctx());
  op::check_pointer("prepack_linear_gn_min", "weight", weight, 4, ctx);
}

LinearGnMinWeights prepack_linear_gn_min(Runtime& rt, int64_t N, int64_t K, Precision precision,
                                         const float* weight, CUstream stream) {
  validate_prepack(N, K, precision, weight);
  auto ctx = [&] { return pack_text(N, K, precision); };
  const LinearGnMinProblem p = pack_problem(N, K, precision);
  if (op::capturing(rt, stream))
    op::capture_error("prepack_linear_gn_min", "packing allocates", ctx(),
                      "prepack before capturing");
  LinearGnMinWeights w;
  const int64_t pitch = linear_gn_min_split_pitch(K);
  w.buf_ = DeviceBuffer(rt, linear_gn_min_split_bytes(N, K));
  Kernel k;
  LaunchConfig launch;
  const auto a = reinterpret_cast<uintptr_t>(weight);
  detail::build_split_kernel(rt, p, N, a % 16 == 0 ? 16 : 4, &k, &launch);
  {
    kjit::detail::ContextGuard guard(rt.context());
    detail::launch_split(k, launch, weight, w.buf_.ptr(),
                         w.buf_.ptr() + detail::LgmWorkspace::split_exps_offset(N, K), N, pitch,
                         false, stream);
  }
  w.N_ = N;
  w.K_ = K;
  w.precision_ = precision;
  w.ctx_ = rt.context();
  w.device_ = rt.props().ordinal;
  return w;
}

}  // namespace kjit::ops
