// Linear -> GroupNorm -> min -> + bias: validation, plans (the hot path only looks them up),
// kjit's per-stream workspaces, the cuBLASLt GEMM and the fused kernel's launch.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/record.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "ops/env.hpp"
#include "ops/linear_gn_min_plan.hpp"
#include "ops/problem_json.hpp"

namespace kjit::ops {

using kjit::detail::ContextGuard;
namespace lt = kjit::detail::lt;

namespace {

// Each error names the option or operand it is about (Error::field).
[[noreturn]] void bad(const LinearGnMinProblem& p, const std::string& field,
                      const std::string& what) {
  op::invalid("linear_gn_min", field, what, p.describe());
}

constexpr const char* kReserveHint =
    "call reserve_linear_gn_min_workspace before capturing, or pass a workspace";

size_t ab_size(Precision pr) {
  return pr == Precision::Bf16Inputs ? 2 : 4;
}

int64_t align_class(const void* ptr, size_t esz) {
  const auto a = reinterpret_cast<uintptr_t>(ptr);
  return a % 256 == 0 ? 256 : a % 16 == 0 ? 16 : static_cast<int64_t>(esz);
}

struct Span {
  const char* name;
  uintptr_t lo;
  size_t bytes;
  bool overlaps(const Span& o) const {
    return bytes && o.bytes && lo < o.lo + o.bytes && o.lo < lo + bytes;
  }
};

}  // namespace

namespace {

// The checks of both calls. `w_bytes` is the weight's extent (the pack's with a pack, whose
// pointer was checked by validate_pack); `packed`: the workspace needs no room for the split W.
void check_call(const LinearGnMinProblem& p, const void* x, const void* w, size_t w_bytes,
                const float* lb, const float* gamma, const float* beta, const float* bias,
                const float* out, const LinearGnMinOptions& opt, Workspace ws, bool packed) {
  validate(p, opt);
  const size_t ab = ab_size(p.precision);
  auto ctx = [&] { return p.describe(); };  // formatted only when a check fails
  for (const auto& [name, ptr, esz] : {std::tuple<const char*, const void*, size_t>{"x", x, ab},
                                       {"weight", w, ab},
                                       {"linear_bias", lb, 4},
                                       {"gamma", gamma, 4},
                                       {"beta", beta, 4},
                                       {"bias", bias, 4},
                                       {"out", out, 4}})
    op::check_pointer("linear_gn_min", name, ptr, esz, ctx);
  const size_t n4 = static_cast<size_t>(p.N) * 4;
  auto span = [](const char* name, const void* ptr, size_t bytes) {
    return Span{name, reinterpret_cast<uintptr_t>(ptr), bytes};
  };
  const Span o = span("out", out, static_cast<size_t>(p.M * p.N) * 4);
  // The kernel reads gamma, beta, bias (and linear_bias, when it adds it) while it writes out.
  // (x and weight are read by the GEMM, which the stream finishes before the kernel starts.)
  for (const Span& s : {span("linear_bias", lb, n4), span("gamma", gamma, n4),
                        span("beta", beta, n4), span("bias", bias, n4)})
    if (o.overlaps(s)) bad(p, "out", std::string("out overlaps ") + s.name);
  if (!ws.ptr) {
    if (ws.bytes != 0)
      bad(p, "workspace",
          "workspace.bytes = " + std::to_string(ws.bytes) + " given with a null workspace.ptr");
    return;
  }
  const size_t need = linear_gn_min_workspace_size(p, packed);
  if (ws.bytes < need)
    bad(p, "workspace",
        "workspace of " + std::to_string(ws.bytes) + " bytes is smaller than " +
            "linear_gn_min_workspace_size = " + std::to_string(need));
  if (reinterpret_cast<uintptr_t>(ws.ptr) % 256 != 0)
    bad(p, "workspace", "workspace must be 256-byte aligned");
  const Span wsp = span("workspace", ws.ptr, need);
  const Span others[] = {span("x", x, static_cast<size_t>(p.M * p.K) * ab),
                         span("weight", w, w_bytes),
                         span("linear_bias", lb, n4),
                         span("gamma", gamma, n4),
                         span("beta", beta, n4),
                         span("bias", bias, n4),
                         o};
  for (const Span& s : others)
    if (wsp.overlaps(s)) bad(p, "workspace", std::string("workspace overlaps ") + s.name);
}

}  // namespace

void validate_call(const LinearGnMinProblem& p, const void* x, const void* w, const float* lb,
                   const float* gamma, const float* beta, const float* bias, const float* out,
                   const LinearGnMinOptions& opt, Workspace ws) {
  validate(p);  // before p.N * p.K is formed
  check_call(p, x, w, static_cast<size_t>(p.N * p.K) * ab_size(p.precision), lb, gamma, beta, bias,
             out, opt, ws, false);
}

namespace {

detail::LgmKey key_for(const LinearGnMinProblem& p, int64_t ax, int64_t aw, int64_t alb,
                       bool out_aligned, const LinearGnMinOptions& opt) {
  const GnMinConfig* f = opt.config ? &*opt.config : nullptr;
  const bool tune = !f && (opt.autotune || detail::env_autotune());
  return detail::LgmKey{p.M,
                        p.K,
                        p.N,
                        p.G,
                        static_cast<int64_t>(p.precision),
                        tune,
                        ax,
                        aw,
                        alb,
                        out_aligned,
                        static_cast<int64_t>(opt.bias_add),
                        f != nullptr,
                        f ? f->threads : 0,
                        f ? f->slice : 0,
                        f ? f->sub : 0,
                        f ? f->seq : 0,
                        f ? f->vec : 0,
                        f ? f->pad : 0,
                        f ? f->smem : 0,
                        f ? f->affine_smem : 0,
                        f ? f->out_vec : 0,
                        f ? f->split : 0,
                        opt.gemm ? 1 : 0,
                        opt.gemm ? opt.gemm->id : 0,
                        opt.gemm ? opt.gemm->tile : 0,
                        opt.gemm ? opt.gemm->stages : 0,
                        opt.gemm ? opt.gemm->splitk : 0,
                        opt.gemm ? opt.gemm->reduction : 0,
                        opt.gemm ? opt.gemm->swizzle : 0,
                        opt.gemm ? opt.gemm->cluster : 0};
}

void throw_if_capturing(Runtime& rt, CUstream stream, const LinearGnMinProblem& p,
                        const char* what) {
  if (op::capturing(rt, stream))
    op::capture_error("linear_gn_min", what, p.describe(),
                      "call prepare_linear_gn_min (and reserve_linear_gn_min_workspace, or pass a "
                      "workspace) before capturing");
}

// Why the device cannot give c its shared memory, or "" when it can.
std::string smem_excess(Runtime& rt, const LinearGnMinProblem& p, const GnMinConfig& c) {
  const size_t smem = gn_min_smem_bytes(p, c), most = rt.props().max_smem_per_block_optin;
  if (smem <= most) return {};
  return "config " + c.describe() + " needs " + std::to_string(smem) +
         " bytes of shared memory per block; " + rt.props().name + " allows " +
         std::to_string(most);
}

// A forced config, checked once, where its plan is built (a call with a plan checks nothing).
void check_forced(Runtime& rt, const LinearGnMinProblem& p, GnMinConfig c, bool out_aligned) {
  c.linear_bias = p.precision == Precision::Fp32x3 || c.linear_bias;  // the plan sets it
  validate(p, c);  // its errors name the field "config"
  if (c.out_vec && !out_aligned)
    bad(p, "config",
        "config " + c.describe() + " stores out in 16-byte vectors (out_vec), but out is not " +
            "16-byte aligned");
  // A forced config is the caller's choice: InvalidArgument (build_kernel's Unsupported is for
  // the candidates autotuning skips).
  if (const std::string excess = smem_excess(rt, p, c); !excess.empty()) bad(p, "config", excess);
}

const detail::LgmPlan& plan_for(Runtime& rt, detail::LgmState& st, const LinearGnMinProblem& p,
                                const detail::LgmKey& key, const LinearGnMinOptions& opt,
                                CUstream stream) {
  if (const detail::LgmPlan* plan = st.plans.find(key)) return *plan;
  throw_if_capturing(rt, stream, p, "the plan (cuBLASLt algorithm, kernel) is not built yet");
  if (opt.config) check_forced(rt, p, *opt.config, key.out_aligned != 0);
  return *st.plans.find_or_build(key, [&] {
    // A forced config's problem is not what a plain call of it runs: its kernels are recorded.
    const op::ProblemScope rec = op::record_problem(
        rt,
        [&] {
          return opt.config
                     ? std::string()
                     : linear_gn_min_problem_json(p, static_cast<LinearBiasAdd>(key.bias_add));
        },
        key.out_aligned != 0, key.autotune != 0);
    auto plan = std::make_unique<detail::LgmPlan>();
    plan->ws = detail::LgmWorkspace::of(p);
    if (key.autotune) {
      detail::autotune(rt, st, p, key, opt.eps, plan.get());
    } else {
      detail::build_gemm(rt, st, p, key, &plan->gemm);
      // What linear_gn_min_configs_for names (build_kernel matches its bias variant to the GEMM).
      LinearGnMinOptions plain = opt;
      plain.autotune = false;
      detail::build_kernel(
          rt, p, linear_gn_min_configs_for(p, Target::of(rt), plain, key.out_aligned != 0).front(),
          nullptr, plan.get());
    }
    if (p.precision == Precision::Fp32x3) {
      detail::build_split_kernel(rt, p, p.M, key.align_x, &plan->split_x, &plan->split_x_launch);
      detail::build_split_kernel(rt, p, p.N, key.align_w, &plan->split_w, &plan->split_w_launch);
    }
    return plan;
  });
}

// Heuristic and AlgoCheck look at the bias pointer's value for its alignment: a stand-in with
// exactly the alignment class of the caller's.
const void* bias_stand_in(int64_t align) {
  return reinterpret_cast<const void*>(uintptr_t{1} << 40 | static_cast<uintptr_t>(align % 256));
}

}  // namespace

namespace detail {

cublasLtHandle_t LgmState::handle(Runtime& rt) {
  std::call_once(handle_once_, [&] {
    ContextGuard guard(rt.context());
    handle_ = std::make_unique<lt::Handle>();
  });
  return handle_->get();
}

namespace {

// op(A) = W^T, B = x, no epilogue (the split path's hi*hi slices).
void configure_plain(lt::MatmulDesc& desc) {
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, ta).set(CUBLASLT_MATMUL_DESC_TRANSB, tb);
}

}  // namespace

void configure_desc(lt::MatmulDesc& desc, const LgmGemm& g, const void* linear_bias) {
  configure_plain(desc);
  if (!g.bias_epilogue) return;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const int32_t bias_type = CUDA_R_32F;
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue)
      .set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type)
      .set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, linear_bias);
}

void init_gemm(const LinearGnMinProblem& p, LgmGemm* g) {
  const auto M = static_cast<uint64_t>(p.M), K = static_cast<uint64_t>(p.K),
             N = static_cast<uint64_t>(p.N);
  g->d = lt::Layout(CUDA_R_32F, N, M, p.N);  // Y [M, N] row-major = N x M column-major
  g->split = p.precision == Precision::Fp32x3;
  if (!g->split) {
    const cudaDataType_t ab = p.precision == Precision::Bf16Inputs ? CUDA_R_16BF : CUDA_R_32F;
    g->compute = p.precision == Precision::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    g->a = lt::Layout(ab, K, N, p.K);  // W [N, K] row-major = K x N column-major
    g->b = lt::Layout(ab, K, M, p.K);  // x [M, K] row-major = K x M column-major
    return;
  }
  // FP16 tensor cores with fp32 accumulation on the split rows (docs/OPS.md, "Split precision").
  g->compute = CUBLAS_COMPUTE_32F;
  g->bias_epilogue = false;  // the kernel adds the bias after undoing the scales
  g->pitch = linear_gn_min_split_pitch(p.K);
  const auto row = static_cast<uint64_t>(2 * g->pitch);
  g->a = lt::Layout(CUDA_R_16F, row, N, 2 * g->pitch);  // [hi | lo] of W: all of each row
  g->b = lt::Layout(CUDA_R_16F, row, M, 2 * g->pitch);  // [lo | hi] of x
  // hi*hi in slices of equal width (a multiple of 128 halves, so every slice starts 256-byte
  // aligned), the last one shorter where the padded K does not divide. A GEMM per slice: K/2048
  // launches per call (4 for the seed problem), each still M x N x 2048 of work.
  const int64_t count = (g->pitch + kSplitSliceK - 1) / kSplitSliceK;
  const int64_t width = (g->pitch / 128 + count - 1) / count * 128;
  g->slices = g->pitch / width;
  auto slice = [&](int64_t k, LgmSliceGemm* s) {
    s->k = k;
    s->a = lt::Layout(CUDA_R_16F, static_cast<uint64_t>(k), N, 2 * g->pitch);  // W's hi, offset 0
    s->b = lt::Layout(CUDA_R_16F, static_cast<uint64_t>(k), M, 2 * g->pitch);  // x's hi, at pitch
  };
  slice(width, &g->slice);
  g->tail.k = 0;
  if (g->pitch % width != 0) slice(g->pitch % width, &g->tail);
}

std::vector<cublasLtMatmulHeuristicResult_t> gemm_candidates(Runtime& rt, LgmState& st,
                                                             const LgmKey& key, LgmGemm& g,
                                                             int count) {
  lt::MatmulDesc desc(g.compute, CUDA_R_32F);
  configure_desc(desc, g, bias_stand_in(key.align_lb));
  lt::Preference pref;
  // The split GEMMs read kjit's split rows, every part 256-byte aligned.
  pref.max_workspace(kLinearGnMinGemmWorkspace)
      .min_alignment(static_cast<uint32_t>(g.split ? 256 : key.align_w),
                     static_cast<uint32_t>(g.split ? 256 : key.align_x), 256, 256);
  cublasLtHandle_t h = st.handle(rt);
  ContextGuard guard(rt.context());
  return lt::usable(h, desc, g.a, g.b, g.d, g.d, pref, count);
}

// No bias, and only kjit's 256-byte aligned split rows: nothing of the caller's pointers matters.
void build_slice_gemms(Runtime& rt, LgmState& st, LgmGemm* g) {
  lt::MatmulDesc desc(g->compute, CUDA_R_32F);
  configure_plain(desc);
  lt::Preference pref;
  pref.max_workspace(kLinearGnMinGemmWorkspace).min_alignment(256, 256, 256, 256);
  cublasLtHandle_t h = st.handle(rt);
  ContextGuard guard(rt.context());
  for (LgmSliceGemm* s : {&g->slice, &g->tail})
    if (s->k > 0) s->algo = lt::heuristic(h, desc, s->a, s->b, g->d, g->d, pref, 1)[0].algo;
}

bool gemm_algo_ok(Runtime& rt, LgmState& st, const LgmKey& key, LgmGemm& g,
                  const cublasLtMatmulAlgo_t& algo, size_t* workspace) {
  lt::MatmulDesc desc(g.compute, CUDA_R_32F);
  configure_desc(desc, g, bias_stand_in(key.align_lb));
  cublasLtHandle_t h = st.handle(rt);
  ContextGuard guard(rt.context());
  return lt::algo_ok(h, desc, g.a, g.b, g.d, g.d, algo, workspace) &&
         *workspace <= kLinearGnMinGemmWorkspace;
}

std::optional<GemmAlgo> LgmKey::pinned_gemm() const {
  if (!gemm_forced) return std::nullopt;
  auto i = [](int64_t v) { return static_cast<int>(v); };
  return GemmAlgo{i(gemm_id),        i(gemm_tile),    i(gemm_stages), i(gemm_splitk),
                  i(gemm_reduction), i(gemm_swizzle), i(gemm_cluster)};
}

bool gemm_bias_epilogue(LinearBiasAdd bias_add, Precision precision) {
  return !linear_gn_min_kernel_adds_bias(bias_add, false, precision).front();
}

GemmAlgo gemm_algo_of(const cublasLtMatmulAlgo_t& algo) {
  const lt::AlgoFields f = lt::fields(algo);
  // ID and SPLITK_NUM are int32 (split-k is -1 in some TF32 algorithms), the others unsigned; an
  // unsigned value past INT_MAX (none seen) is written as -1, which parse refuses for those keys.
  auto i = [](long long v) { return v < INT_MIN || v > INT_MAX ? -1 : static_cast<int>(v); };
  return {i(f.id), i(f.tile), i(f.stages), i(f.splitk), i(f.reduction), i(f.swizzle), i(f.cluster)};
}

std::vector<cublasLtMatmulHeuristicResult_t> gemm_top(Runtime& rt, LgmState& st, const LgmKey& key,
                                                      LgmGemm& g) {
  std::vector<cublasLtMatmulHeuristicResult_t> out;
  std::vector<GemmAlgo> seen;
  // Within kjit's workspace, and each GemmAlgo once: a pin names the first of equal ones.
  for (const auto& a : gemm_candidates(rt, st, key, g, kLinearGnMinGemmTopK)) {
    const GemmAlgo f = gemm_algo_of(a.algo);
    if (a.workspaceSize > kLinearGnMinGemmWorkspace ||
        std::find(seen.begin(), seen.end(), f) != seen.end())
      continue;
    seen.push_back(f);
    out.push_back(a);
  }
  return out;
}

cublasLtMatmulHeuristicResult_t pinned_gemm(Runtime& rt, LgmState& st, const LinearGnMinProblem& p,
                                            const LgmKey& key, LgmGemm& g) {
  const GemmAlgo pin = *key.pinned_gemm();
  const auto top = gemm_top(rt, st, key, g);
  if (top.empty())
    throw Error(Errc::Cublas, "linear_gn_min: cuBLASLt has no usable algorithm for " +
                                  p.describe() + (g.bias_epilogue ? " with" : " without") +
                                  " the bias epilogue");
  for (const auto& a : top)
    if (gemm_algo_of(a.algo) == pin) return a;
  std::string have;
  for (const auto& a : top) have += (have.empty() ? "" : "; ") + gemm_algo_of(a.algo).describe();
  bad(p, "gemm",
      "gemm " + pin.describe() + " (a config text's \"; GEMM\" part) is not among cuBLASLt's top " +
          std::to_string(kLinearGnMinGemmTopK) + " algorithms for this problem " +
          (g.bias_epilogue ? "with" : "without") + " the bias epilogue: " + have);
}

void build_gemm(Runtime& rt, LgmState& st, const LinearGnMinProblem& p, const LgmKey& key,
                LgmGemm* g) {
  init_gemm(p, g);
  g->bias_epilogue = gemm_bias_epilogue(static_cast<LinearBiasAdd>(key.bias_add), p.precision);
  cublasLtMatmulHeuristicResult_t best{};
  if (key.gemm_forced) {
    best = pinned_gemm(rt, st, p, key, *g);
  } else {
    const auto first = gemm_candidates(rt, st, key, *g, 1);
    if (first.empty())
      throw Error(Errc::Cublas, "linear_gn_min: cuBLASLt's heuristic has no usable algorithm for " +
                                    p.describe());
    best = first[0];
  }
  g->algo = best.algo;
  g->workspace = best.workspaceSize;
  g->source = key.gemm_forced ? "pinned" : "heuristic";
  if (g->split) build_slice_gemms(rt, st, g);
}

void run_gemm(const LgmGemm& g, const void* x, const void* w, const void* lb, CUdeviceptr y,
              CUdeviceptr lt_ws, CUstream stream, cublasLtHandle_t h) {
  lt::MatmulDesc desc(g.compute, CUDA_R_32F);
  configure_desc(desc, g, lb);
  // The split's lo parts are stored times 2^11 (kjit/f16_split.cuh).
  const float alpha = g.split ? 0x1p-11f : 1.f, beta = 0.f;
  void* yp = reinterpret_cast<void*>(y);
  lt::check(cublasLtMatmul(h, desc.get(), &alpha, w, g.a.get(), x, g.b.get(), &beta, yp, g.d.get(),
                           yp, g.d.get(), &g.algo, reinterpret_cast<void*>(lt_ws),
                           kLinearGnMinGemmWorkspace, stream),
            "cublasLtMatmul");
  if (!g.split) return;
  // hi*hi added onto lo*hi + hi*lo, slice by slice: x's hi part starts `pitch` halves into its
  // rows, W's at 0.
  lt::MatmulDesc desc2(g.compute, CUDA_R_32F);
  configure_plain(desc2);
  const float one = 1.f;
  const auto* w_hi = static_cast<const char*>(w);
  const char* x_hi = static_cast<const char*>(x) + g.pitch * 2;
  auto add = [&](const LgmSliceGemm& s, int64_t column) {
    const int64_t at = column * 2;  // bytes
    lt::check(cublasLtMatmul(h, desc2.get(), &one, w_hi + at, s.a.get(), x_hi + at, s.b.get(), &one,
                             yp, g.d.get(), yp, g.d.get(), &s.algo, reinterpret_cast<void*>(lt_ws),
                             kLinearGnMinGemmWorkspace, stream),
              "cublasLtMatmul (split, hi*hi)");
  };
  for (int64_t i = 0; i < g.slices; ++i) add(g.slice, i * g.slice.k);
  if (g.tail.k > 0) add(g.tail, g.slices * g.slice.k);
}

void build_kernel(Runtime& rt, const LinearGnMinProblem& p, const GnMinConfig& config,
                  CUstream stream, LgmPlan* plan) {
  GnMinConfig c = config;
  c.linear_bias = !plan->gemm.bias_epilogue;
  validate(p, c);
  if (const std::string excess = smem_excess(rt, p, c); !excess.empty())
    throw Error(Errc::Unsupported, "linear_gn_min: " + excess);
  const size_t smem = gn_min_smem_bytes(p, c);
  plan->config = c;
  plan->channels = static_cast<int>(p.N);
  plan->launch.grid.x = static_cast<unsigned>((p.M + c.rows() - 1) / c.rows());
  plan->launch.block.x = static_cast<unsigned>(c.threads);
  plan->launch.shared_bytes = static_cast<unsigned>(smem);
  plan->launch.programmatic = use_pdl(rt.arch());
  plan->kernel = rt.kernel(gn_min_spec(p, c), stream);
  if (!c.split) return;
  // A thread per 1 or 4 rows; about 8 CTAs per SM in all, each walking a share of the channels.
  LaunchConfig& b = plan->broadcast_launch;
  const int64_t per_cta = int64_t{kGnMinBroadcastThreads} * (c.out_vec ? 4 : 1);
  b.grid.x = static_cast<unsigned>((p.M + per_cta - 1) / per_cta);
  const int64_t want = (int64_t{8} * rt.props().sm_count + b.grid.x - 1) / b.grid.x;
  b.grid.y = static_cast<unsigned>(std::clamp<int64_t>(want, 1, std::min<int64_t>(p.N, 65535)));
  b.block.x = kGnMinBroadcastThreads;
  b.programmatic = plan->launch.programmatic;
  plan->broadcast = rt.kernel(gn_min_specs(p, c)[1], stream);
}

void launch_kernel(const LgmPlan& plan, CUdeviceptr y, const float* lb, const float* gamma,
                   const float* beta, const float* bias, float eps, float* out, long long M,
                   CUstream stream, SplitExps exps) {
  const float* yp = reinterpret_cast<const float*>(y);
  if (!plan.config.split) {
    plan.kernel(stream, plan.launch, yp, lb, gamma, beta, bias, eps, out, M, exps.x, exps.w);
    return;
  }
  float* mins = reinterpret_cast<float*>(y + plan.ws.y_bytes);
  plan.kernel(stream, plan.launch, yp, lb, gamma, beta, bias, eps, mins, M, exps.x, exps.w);
  const float* cmins = mins;
  const int n = plan.channels;
  plan.broadcast(stream, plan.broadcast_launch, cmins, bias, out, M, n);
}

}  // namespace detail

size_t linear_gn_min_workspace_size(const LinearGnMinProblem& p, bool packed_weight) {
  validate(p);
  return detail::LgmWorkspace::of(p).bytes(packed_weight);
}

namespace {

struct SplitOperands {
  const void* x;
  const void* w;
  detail::SplitExps exps;
};

// Fp32x3: splits x, and W without a pack, into the workspace at y; the GEMM's operands (the
// split rows) and where their exponents are.
SplitOperands split_operands(const detail::LgmPlan& plan, const LinearGnMinProblem& p,
                             const void* x, const void* weight, CUdeviceptr pack, CUdeviceptr y,
                             CUstream stream) {
  using detail::LgmWorkspace;
  const CUdeviceptr xs = y + plan.ws.xs_offset();
  const CUdeviceptr xs_exps = xs + LgmWorkspace::split_exps_offset(p.M, p.K);
  detail::launch_split(plan.split_x, plan.split_x_launch, x, xs, xs_exps, p.M, plan.gemm.pitch,
                       true, stream);
  const CUdeviceptr ws = pack ? pack : y + plan.ws.ws_offset();
  const CUdeviceptr ws_exps = ws + LgmWorkspace::split_exps_offset(p.N, p.K);
  if (!pack)
    detail::launch_split(plan.split_w, plan.split_w_launch, weight, ws, ws_exps, p.N,
                         plan.gemm.pitch, false, stream);
  return {reinterpret_cast<const void*>(xs),
          reinterpret_cast<const void*>(ws),
          {reinterpret_cast<const int*>(xs_exps), reinterpret_cast<const int*>(ws_exps)}};
}

// Both calls after their checks. `pack`: the prepacked weight's split rows (0: split `weight`
// into the workspace first, for Fp32x3).
void run_call(Runtime& rt, const LinearGnMinProblem& p, const void* x, const void* weight,
              CUdeviceptr pack, int64_t align_w, const float* linear_bias, const float* gamma,
              const float* beta, const float* bias, float* out,
              const LinearGnMinOptions& pinned_opt, CUstream stream, Workspace ws) {
  const LinearGnMinOptions opt = with_pinned_bias_add(p, pinned_opt);  // no allocation
  detail::LgmState& st = rt.extension<detail::LgmState>();
  const size_t ab = ab_size(p.precision);
  const detail::LgmKey key = key_for(p, align_class(x, ab), align_w, align_class(linear_bias, 4),
                                     reinterpret_cast<uintptr_t>(out) % 16 == 0, opt);
  const detail::LgmPlan& plan = plan_for(rt, st, p, key, opt, stream);
  // The plan knows the workspace size: no second validation on the hot path. kjit's own
  // workspace is held until the kernel is enqueued: the GEMM's output must reach this call's
  // kernel, not that of another thread enqueueing on the same stream.
  const bool packed = pack != 0;
  kjit::op::StreamWorkspaces::Lease lease;
  if (!ws.ptr)
    lease = st.workspaces.lease(rt, stream, plan.ws.bytes(packed), "linear_gn_min", kReserveHint);
  const CUdeviceptr y = ws.ptr ? reinterpret_cast<CUdeviceptr>(ws.ptr) : lease.ptr();
  cublasLtHandle_t h = st.handle(rt);
  ContextGuard guard(rt.context());
  const SplitOperands ops = plan.gemm.split ? split_operands(plan, p, x, weight, pack, y, stream)
                                            : SplitOperands{x, weight, {}};
  detail::run_gemm(plan.gemm, ops.x, ops.w, linear_bias, y, y + plan.ws.lt_offset(), stream, h);
  detail::launch_kernel(plan, y, linear_bias, gamma, beta, bias, opt.eps, out, p.M, stream,
                        ops.exps);
}

}  // namespace

void linear_gn_min(Runtime& rt, const LinearGnMinProblem& p, const void* x, const void* weight,
                   const float* linear_bias, const float* gamma, const float* beta,
                   const float* bias, float* out, const LinearGnMinOptions& opt, CUstream stream,
                   Workspace ws) {
  validate_call(p, x, weight, linear_bias, gamma, beta, bias, out, opt, ws);
  run_call(rt, p, x, weight, 0, align_class(weight, ab_size(p.precision)), linear_bias, gamma, beta,
           bias, out, opt, stream, ws);
}

void linear_gn_min(Runtime& rt, const LinearGnMinProblem& p, const void* x,
                   const LinearGnMinWeights& weight, const float* linear_bias, const float* gamma,
                   const float* beta, const float* bias, float* out, const LinearGnMinOptions& opt,
                   CUstream stream, Workspace ws) {
  validate(p);
  validate_pack(p, weight, rt.context());
  const void* w = reinterpret_cast<const void*>(weight.data());
  check_call(p, x, w, weight.bytes(), linear_bias, gamma, beta, bias, out, opt, ws, true);
  // The pack is 256-byte aligned: the plan of a prepared call.
  run_call(rt, p, x, nullptr, weight.data(), 256, linear_bias, gamma, beta, bias, out, opt, stream,
           ws);
}

void validate(const LinearGnMinProblem& p, const LinearGnMinOptions& pinned_opt) {
  validate(p);
  const LinearGnMinOptions opt = with_pinned_bias_add(p, pinned_opt);
  op::check_eps("linear_gn_min", opt.eps, [&] { return p.describe(); });
  const auto b = static_cast<int>(opt.bias_add);
  if (b < 0 || b > static_cast<int>(LinearBiasAdd::Kernel))
    bad(p, "bias_add", "bias_add = " + std::to_string(b) + " is not one of Auto, Epilogue, Kernel");
  if (p.precision == Precision::Fp32x3 && opt.bias_add == LinearBiasAdd::Epilogue)
    bad(p, "bias_add",
        "bias_add = epilogue cannot run fp32x3: its GEMM sums scaled rows, and the fused kernel "
        "adds linear_bias after undoing the scales (use auto or kernel)");
}

std::string LinearGnMinInfo::pin() const {
  return config.describe() + "; GEMM " + gemm_algo;
}

std::string LinearGnMinInfo::describe() const {
  return pin() + "; kernel " + kernel + "; GEMM from " + gemm_source +
         (gemm_slices.empty() ? "" : "; " + gemm_slices);
}

LinearGnMinInfo prepare_linear_gn_min(Runtime& rt, const LinearGnMinProblem& p,
                                      const LinearGnMinOptions& pinned_opt) {
  validate(p, pinned_opt);
  const LinearGnMinOptions opt = with_pinned_bias_add(p, pinned_opt);
  detail::LgmState& st = rt.extension<detail::LgmState>();
  const detail::LgmKey key = key_for(p, 256, 256, 256, true, opt);
  const detail::LgmPlan& plan = plan_for(rt, st, p, key, opt, nullptr);
  LinearGnMinInfo info;
  info.config = plan.config;
  info.kernel = plan.kernel.instantiation();
  if (plan.config.split) info.kernel += " + " + plan.broadcast.instantiation();
  info.gemm_algo = detail::gemm_algo_of(plan.gemm.algo).describe();
  info.gemm_source = plan.gemm.source;
  info.gemm_bias_epilogue = plan.gemm.bias_epilogue;
  info.gemm_workspace_bytes = plan.gemm.workspace;
  info.workspace_bytes = linear_gn_min_workspace_size(p);
  if (plan.gemm.split) {
    info.split_kernel = plan.split_x.instantiation();
    const detail::LgmGemm& g = plan.gemm;
    info.gemm_slices = "hi*hi in " + std::to_string(g.slices) + " x K=" + std::to_string(g.slice.k);
    info.gemm_slices += " slices: " + detail::gemm_algo_of(g.slice.algo).describe();
    if (g.tail.k > 0)
      info.gemm_slices +=
          "; + K=" + std::to_string(g.tail.k) + ": " + detail::gemm_algo_of(g.tail.algo).describe();
  }
  return info;
}

std::vector<GemmAlgo> linear_gn_min_gemm_algos(Runtime& rt, const LinearGnMinProblem& p,
                                               const LinearGnMinOptions& pinned_opt) {
  validate(p, pinned_opt);
  const LinearGnMinOptions opt = with_pinned_bias_add(p, pinned_opt);
  detail::LgmState& st = rt.extension<detail::LgmState>();
  const detail::LgmKey key = key_for(p, 256, 256, 256, true, opt);
  detail::LgmGemm g;
  detail::init_gemm(p, &g);
  g.bias_epilogue = detail::gemm_bias_epilogue(opt.bias_add, p.precision);  // as build_gemm
  std::vector<GemmAlgo> out;
  for (const auto& a : detail::gemm_top(rt, st, key, g))
    out.push_back(detail::gemm_algo_of(a.algo));
  return out;
}

void reserve_linear_gn_min_workspace(Runtime& rt, const LinearGnMinProblem& p, CUstream stream,
                                     bool packed_weight) {
  rt.extension<detail::LgmState>().workspaces.get(
      rt, stream, linear_gn_min_workspace_size(p, packed_weight), "linear_gn_min", kReserveHint);
}

}  // namespace kjit::ops
