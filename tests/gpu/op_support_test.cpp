// The public op-support API as a host app's op uses it: per-runtime state, Target, specs_for.
#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "gpu_env.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/op/stream_workspaces.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace {

std::atomic<int> g_made{0}, g_destroyed{0};

// A host app's op state: a plan table and workspaces of its own, like the built-in ops'.
struct AppOpState {
  explicit AppOpState(kjit::Runtime& rt) : ordinal(rt.props().ordinal) { ++g_made; }
  ~AppOpState() { ++g_destroyed; }
  int ordinal;
  kjit::op::PlanTable<int64_t, int> plans;
  kjit::op::StreamWorkspaces workspaces;
};

struct OtherState {
  explicit OtherState(kjit::Runtime& rt) : app(rt.extension<AppOpState>()) {}
  AppOpState& app;  // an extension may use another one from its constructor
};

}  // namespace

TEST_CASE("Runtime::extension: one object per runtime and type, made once under racing threads" *
          doctest::test_suite("host_logic")) {
  g_made = g_destroyed = 0;
  {
    kjit::Runtime rt;
    std::vector<AppOpState*> seen(8);
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&, i] { seen[i] = &rt.extension<AppOpState>(); });
    for (auto& t : threads) t.join();
    CHECK(g_made == 1);
    CHECK(std::set<AppOpState*>(seen.begin(), seen.end()).size() == 1);
    CHECK(&rt.extension<OtherState>().app == seen[0]);
    // Its workspaces work like the built-in ops' (a lease of the stream's buffer).
    kjit::Stream stream(rt);
    auto lease = rt.extension<AppOpState>().workspaces.lease(rt, stream.get(), 4096, "app_op",
                                                             "reserve first");
    CHECK(lease.ptr() != 0);
    lease.release();
    // Another runtime has its own.
    kjit::Runtime other;
    CHECK(&other.extension<AppOpState>() != seen[0]);
    CHECK(g_made == 2);
  }
  CHECK(g_destroyed == 2);  // destroyed with their runtimes
}

TEST_CASE("Target::of describes the device, and specs_for is what the ops load" *
          doctest::test_suite("host_logic")) {
  auto& rt = kjit_test::runtime();
  const kjit::Target t = kjit::Target::of(rt);
  CHECK(t.arch == rt.arch());
  CHECK(t.cc == rt.props().cc());
  CHECK(t.sm_count == rt.props().sm_count);
  CHECK(t.max_smem_per_block == rt.props().max_smem_per_block_optin);
  // What prepare loads is the first config configs_for names.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{8, 256, 24, 24}, {1, 64, 256, 256}, {2, 12, 331}}) {
    const auto p = kjit::ops::GroupNormProblem::from_shape(
        shape, shape[1] / 4 * 4 == shape[1] ? 4 : 3, kjit::DType::F32);
    const kjit::ops::GroupNormOptions opt;
    CHECK(kjit::ops::prepare_group_norm(rt, p, opt).describe() ==
          kjit::ops::group_norm_configs_for(p, t, opt, true).front().describe());
  }
}

namespace {

std::atomic<int> g_newer_refused{0};

struct Newer {
  explicit Newer(kjit::Runtime&) {}
};

// Made first, destroyed last: by then Newer is gone, and asking for it must not hand out the
// freed object (found by review: the lock-free slot still pointed at it) or make a new one.
struct Older {
  explicit Older(kjit::Runtime& rt) : rt(rt) {}
  ~Older() {
    try {
      rt.extension<Newer>();
    } catch (const kjit::Error&) {
      ++g_newer_refused;
    }
  }
  kjit::Runtime& rt;
};

}  // namespace

TEST_CASE("Runtime::extension during destruction: a newer extension is gone, not handed out" *
          doctest::test_suite("host_logic")) {
  g_newer_refused = 0;
  {
    kjit::Runtime rt;
    rt.extension<Older>();
    rt.extension<Newer>();
  }
  CHECK(g_newer_refused == 1);
}
