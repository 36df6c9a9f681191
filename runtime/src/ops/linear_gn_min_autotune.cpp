// Linear -> GroupNorm -> min -> + bias autotuning through kjit::Autotuner, in two steps: the
// GEMM (the top 8 of cuBLASLt's heuristic with the bias epilogue and without it, when the
// fused kernel then adds the bias), then the fused kernel's candidate configs on the winner's
// output. Each step's winner is remembered in the disk cache on its own; the GEMM's is named by
// its mode and algorithm (GemmAlgo::describe), found again in the next process's heuristic list
// (the same for the same cuBLASLt version, which is part of the key).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cuda_driver.hpp"
#include "kjit/autotune.hpp"
#include "kjit/compiler.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "ops/candidate_errors.hpp"
#include "ops/env.hpp"
#include "ops/linear_gn_min_plan.hpp"

namespace kjit::ops::detail {
namespace {

namespace lt = kjit::detail::lt;

struct GemmChoice {
  bool epilogue = true;
  cublasLtMatmulHeuristicResult_t algo{};
  std::string describe() const {
    return std::string(epilogue ? "epilogue " : "plain ") + gemm_algo_of(algo.algo).describe();
  }
};

// The heuristic's top kLinearGnMinGemmTopK in each bias mode the problem allows, within kjit's
// workspace (g's bias mode is left as the last one asked).
std::vector<GemmChoice> gemm_choices(Runtime& rt, LgmState& st, const LgmKey& key, LgmGemm& g) {
  std::vector<GemmChoice> out;
  for (bool kernel_adds : linear_gn_min_kernel_adds_bias(
           static_cast<LinearBiasAdd>(key.bias_add), true, static_cast<Precision>(key.precision))) {
    g.bias_epilogue = !kernel_adds;
    // Each description once (the tuner's record names a candidate by it; gemm_top gives each
    // GemmAlgo once already).
    for (const auto& a : gemm_top(rt, st, key, g)) {
      const GemmChoice c{!kernel_adds, a};
      if (std::none_of(out.begin(), out.end(),
                       [&](const GemmChoice& o) { return o.describe() == c.describe(); }))
        out.push_back(c);
    }
  }
  return out;
}

void apply(const GemmChoice& c, LgmGemm* g) {
  g->bias_epilogue = c.epilogue;
  g->algo = c.algo.algo;
  g->workspace = c.algo.workspaceSize;
}

// The key both steps share: the problem, the alignment classes, the bias variant, programmatic
// launch and cuBLASLt's version. Version 6: fp32x3's hi*hi in K slices (5: fp32x3 on FP16 tensor
// cores; 4: the two-step records of kjit::Autotuner).
template <class Config>
void add_key(kjit::Autotuner<Config>& t, const LinearGnMinProblem& p, const LgmKey& key) {
  t.key("problem", p.describe()).key("pdl", env_pdl() ? 1 : 0);
  t.key("cublaslt", static_cast<int64_t>(lt::version()));
  t.key("align_x", key.align_x).key("align_w", key.align_w).key("align_lb", key.align_lb);
  t.key("out_aligned", key.out_aligned).key("bias_add", key.bias_add);
  t.key("gemm_workspace", static_cast<int64_t>(kLinearGnMinGemmWorkspace));
}

kjit::Autotuner<GemmChoice> gemm_tuner(const LinearGnMinProblem& p, const LgmKey& key,
                                       std::vector<GemmChoice> choices) {
  kjit::Autotuner<GemmChoice> t("linear_gn_min.gemm", 6, std::move(choices),
                                [](const GemmChoice& c) { return c.describe(); });
  add_key(t, p, key);
  // Without the epilogue the kernel adds the bias: leave the epilogue only for a clear gain
  // (0.5%), not for timing noise between equally fast kernels.
  for (size_t i = 0; i < t.candidates().size(); ++i)
    if (!t.candidates()[i].epilogue) t.weight(i, 1.005f);
  return t;
}

kjit::Autotuner<GnMinConfig> kernel_tuner(const LinearGnMinProblem& p, const LgmKey& key,
                                          bool epilogue, std::vector<GnMinConfig> cands) {
  kjit::Autotuner<GnMinConfig> t("linear_gn_min.kernel", 6, std::move(cands),
                                 [](const GnMinConfig& c) { return c.describe(); });
  add_key(t, p, key);
  t.key("bias_epilogue", epilogue ? 1 : 0);
  return t;
}

// The GEMM's A or B operand for `rows` rows: the caller's [rows, K], or (Fp32x3) the split rows.
size_t operand_bytes(const LinearGnMinProblem& p, int64_t rows) {
  if (p.precision == Precision::Fp32x3) return linear_gn_min_split_bytes(rows, p.K);
  return static_cast<size_t>(rows * p.K) * (p.precision == Precision::Bf16Inputs ? 2 : 4);
}

// Scratch inputs of the problem's size, offset to the alignment classes of the caller's (the
// split GEMMs read kjit's own 256-byte aligned rows).
struct Scratch {
  Scratch(Runtime& rt, const LinearGnMinProblem& p, const LgmKey& key, const LgmWorkspace& lw)
      : ab(p.precision == Precision::Bf16Inputs ? 2 : 4),
        x(rt, operand_bytes(p, p.M) + 256),
        w(rt, operand_bytes(p, p.N) + 256),
        lb(rt, static_cast<size_t>(p.N) * 4 + 256),
        gamma(rt, static_cast<size_t>(p.N) * 4),
        beta(rt, static_cast<size_t>(p.N) * 4),
        bias(rt, static_cast<size_t>(p.N) * 4),
        out(rt, static_cast<size_t>(p.M * p.N) * 4 + 16),
        ws(rt, lw.bytes(true)) {  // no room for a split W: the split kernels are not timed
    Stream s(rt);
    kjit::detail::ContextGuard g(rt.context());
    const bool split = p.precision == Precision::Fp32x3;
    const std::vector<unsigned char> block = varied_block(split ? 2 : static_cast<int>(ab));
    for (const DeviceBuffer* b : {&x, &w}) fill_varied_async(b->ptr(), b->bytes(), block, s);
    for (const DeviceBuffer* b : {&lb, &beta, &bias})
      fill_async(b->ptr(), 0x3c, b->bytes(), s);  // 0.0115
    fill_async(gamma.ptr(), 0x3f, gamma.bytes(), s);
    if (split) {  // the rows' exponents: 0, the scales of 1
      const size_t xe = LgmWorkspace::split_exps_offset(p.M, p.K);
      const size_t we = LgmWorkspace::split_exps_offset(p.N, p.K);
      fill_async(x.ptr() + xe, 0, operand_bytes(p, p.M) - xe, s);
      fill_async(w.ptr() + we, 0, operand_bytes(p, p.N) - we, s);
      exps.x = reinterpret_cast<const int*>(x.ptr() + xe);
      exps.w = reinterpret_cast<const int*>(w.ptr() + we);
    }
    s.synchronize();
    xp = reinterpret_cast<const void*>(x.ptr() + (split ? 0 : key.align_x % 256));
    wp = reinterpret_cast<const void*>(w.ptr() + (split ? 0 : key.align_w % 256));
    lbp = reinterpret_cast<const void*>(lb.ptr() + key.align_lb % 256);
    outp = reinterpret_cast<float*>(out.ptr() + (key.out_aligned ? 0 : 4));
    y = ws.ptr();
    lt_ws = ws.ptr() + lw.lt_offset();
  }
  size_t ab;
  DeviceBuffer x, w, lb, gamma, beta, bias, out, ws;
  const void *xp = nullptr, *wp = nullptr, *lbp = nullptr;
  float* outp = nullptr;
  CUdeviceptr y = 0, lt_ws = 0;
  SplitExps exps;  // Fp32x3
};

// A cuBLASLt algorithm that refuses this problem when run cannot run it: skipped for good.
void run_or_unsupported(const LgmGemm& g, const Scratch& s, CUstream stream, cublasLtHandle_t h) {
  try {
    run_gemm(g, s.xp, s.wp, s.lbp, s.y, s.lt_ws, stream, h);
  } catch (const Error& e) {
    if (e.code() != Errc::Cublas) throw;
    throw Error(Errc::Unsupported, e.what());
  }
}

}  // namespace

void autotune(Runtime& rt, LgmState& st, const LinearGnMinProblem& p, const LgmKey& key, float eps,
              LgmPlan* plan) {
  init_gemm(p, &plan->gemm);
  // Fp32x3: the tuner times the first GEMM's candidates (2/3 of the work) with the hi*hi
  // slices on the heuristic's algorithms.
  if (plan->gemm.split) build_slice_gemms(rt, st, &plan->gemm);
  // A pinned GEMM is not tuned (nor recorded): only the kernel's configs are, in its variant.
  std::optional<kjit::TuneResult<GemmChoice>> gemm;
  std::optional<kjit::Autotuner<GemmChoice>> gemms;
  if (key.gemm_forced) {
    plan->gemm.bias_epilogue =
        gemm_bias_epilogue(static_cast<LinearBiasAdd>(key.bias_add), p.precision);
    gemm.emplace();
    gemm->config = {plan->gemm.bias_epilogue, pinned_gemm(rt, st, p, key, plan->gemm)};
  } else {
    std::vector<GemmChoice> choices = gemm_choices(rt, st, key, plan->gemm);
    if (choices.empty())
      throw Error(Errc::Cublas, "linear_gn_min: cuBLASLt has no algorithm for " + p.describe());
    gemms.emplace(gemm_tuner(p, key, std::move(choices)));
    gemm = gemms->recall(rt, [](const GemmChoice&) { return Launch{}; });
  }
  const char* gemm_source = key.gemm_forced ? "pinned" : "autotuned";
  const std::vector<GnMinConfig> cands = gn_min_candidates(p, Target::of(rt), key.out_aligned != 0);
  auto build = [&](const GnMinConfig& c, bool epilogue, LgmPlan* into) {
    into->gemm.bias_epilogue = epilogue;
    into->ws = plan->ws;
    build_kernel(rt, p, c, nullptr, into);
  };
  auto kernels = [&](bool epilogue) { return kernel_tuner(p, key, epilogue, cands); };
  auto just_build = [&](bool epilogue) {
    return [&, epilogue](const GnMinConfig& c) -> Launch {
      LgmPlan trial;
      build(c, epilogue, &trial);
      return {};
    };
  };

  // Both stored (or the GEMM pinned and the kernel's stored): nothing to time, no scratch.
  if (gemm) {
    if (auto k = kernels(gemm->config.epilogue).recall(rt, just_build(gemm->config.epilogue))) {
      apply(gemm->config, &plan->gemm);
      plan->gemm.source = key.gemm_forced ? "pinned" : "cache";
      build(k->config, gemm->config.epilogue, plan);
      return;
    }
  }

  const Scratch s(rt, p, key, plan->ws);
  cublasLtHandle_t h = st.handle(rt);
  kjit::detail::ContextGuard guard(rt.context());
  if (!gemm)
    // Candidates are timed one after another: each call sets the plan's GEMM to its own.
    gemm = gemms->tune(rt, [&](const GemmChoice& c) -> Launch {
      return [c, &s, h, plan](CUstream stream) {
        apply(c, &plan->gemm);
        run_or_unsupported(plan->gemm, s, stream, h);
      };
    });
  apply(gemm->config, &plan->gemm);
  plan->gemm.source = gemm->from_record ? "cache" : gemm_source;
  {
    Stream y_stream(rt);  // Y for the kernel's timing
    run_gemm(plan->gemm, s.xp, s.wp, s.lbp, s.y, s.lt_ws, y_stream, h);
    y_stream.synchronize();
  }
  const bool epilogue = plan->gemm.bias_epilogue;
  const auto k = kernels(epilogue).tune(rt, [&](const GnMinConfig& c) -> Launch {
    auto trial = std::make_shared<LgmPlan>();
    build(c, epilogue, trial.get());
    return [trial, &s, eps, &p](CUstream stream) {
      launch_kernel(*trial, s.y, static_cast<const float*>(s.lbp), s.gamma.as<float>(),
                    s.beta.as<float>(), s.bias.as<float>(), eps, s.outp, p.M, stream, s.exps);
    };
  });
  build(k.config, epilogue, plan);
}

}  // namespace kjit::ops::detail
