// Several host threads sharing one runtime on the fake driver: plans built while others launch,
// each specialization loaded once, every call launching its own problem's kernel.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "host_env.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::LayerNormProblem;
using kjit_host::operand;

std::vector<LayerNormProblem> problems() {
  std::vector<LayerNormProblem> out;
  const int64_t widths[] = {64, 768, 1000, 4096, 8192, 20000};
  for (int64_t w : widths) {
    out.push_back(LayerNormProblem::layer_norm(512, w, DType::BF16));
    out.push_back(LayerNormProblem::rms_norm(2, w + 8, DType::F32));
  }
  return out;
}

// Every thread calls every problem `rounds` times, starting at its own offset; returns the
// failures seen (each a message).
std::vector<std::string> run(kjit::Runtime& rt, int threads, int rounds) {
  const std::vector<LayerNormProblem> ps = problems();
  std::atomic<bool> go{false};
  std::vector<std::string> failures(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      kjit::Stream stream(rt);
      while (!go.load()) std::this_thread::yield();
      try {
        for (int i = 0; i < rounds * static_cast<int>(ps.size()); ++i) {
          const LayerNormProblem& p = ps[static_cast<size_t>(i + t) % ps.size()];
          kjit::ops::layer_norm(rt, p, operand(0), nullptr, operand(1), nullptr, operand(2),
                                p.has_bias ? operand(3) : nullptr, {}, stream);
          const kjit_fake_launch l = kjit_host::last_launch();
          if (l.param_bits[7] != static_cast<uint64_t>(p.width))
            throw std::runtime_error(p.describe() + " launched with width " +
                                     std::to_string(l.param_bits[7]));
        }
      } catch (const std::exception& e) {
        failures[static_cast<size_t>(t)] = e.what();
      }
    });
  go = true;
  for (std::thread& th : pool) th.join();
  std::vector<std::string> out;
  for (const std::string& f : failures)
    if (!f.empty()) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("layer_norm from 8 threads on one runtime: each kernel loaded once, every call right") {
  uint64_t sequential_loads = 0;
  {
    kjit::Runtime rt;  // a runtime of its own: its plans and modules start empty
    const uint64_t before = kjit_host::fake().module_loads();
    CHECK(run(rt, 1, 1).empty());
    sequential_loads = kjit_host::fake().module_loads() - before;
  }
  kjit::Runtime rt;
  const uint64_t before = kjit_host::fake().module_loads();
  const uint64_t launches = kjit_host::fake().launches();
  const std::vector<std::string> failures = run(rt, 8, 20);
  for (const std::string& f : failures) CHECK_MESSAGE(false, f);
  CHECK(kjit_host::fake().module_loads() - before == sequential_loads);
  CHECK(kjit_host::fake().launches() - launches == 8u * 20u * problems().size());
}
