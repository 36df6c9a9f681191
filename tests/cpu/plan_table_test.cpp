// The op plan table (runtime/src/plan_table.hpp): each key is built once, also when threads race
// on it, and a build that throws leaves nothing behind.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kjit/op/plan_table.hpp"

namespace {

// No padding: the table hashes and compares a key's bytes (kjit's keys are value-initialized).
struct Key {
  long long a = 0;
  long long b = 0;
};
struct Plan {
  int value = 0;
};
using Table = kjit::op::PlanTable<Key, Plan>;

}  // namespace

TEST_CASE("plan table: threads racing on one key build it once and share the plan") {
  Table t;
  std::atomic<int> builds{0}, arrived{0};
  constexpr int kThreads = 8;
  auto worker = [&] {
    arrived.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    return t.find_or_build(Key{1, 2}, [&] {
      builds.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a build that compiles
      return std::make_unique<Plan>(Plan{42});
    });
  };
  std::vector<std::future<const Plan*>> jobs;
  for (int i = 0; i < kThreads; ++i) jobs.push_back(std::async(std::launch::async, worker));
  const Plan* first = jobs[0].get();
  for (int i = 1; i < kThreads; ++i) CHECK(jobs[static_cast<size_t>(i)].get() == first);
  CHECK(builds.load() == 1);
  CHECK(first->value == 42);
  CHECK(t.find(Key{1, 2}) == first);
}

TEST_CASE("plan table: different keys build in parallel; a failed build is retried") {
  Table t;
  // Two keys whose builds each wait for the other to start: they can only finish in parallel.
  std::atomic<int> started{0};
  auto build_key = [&](long long a) {
    return t.find_or_build(Key{a, 0}, [&, a] {
      started.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      return std::make_unique<Plan>(Plan{static_cast<int>(a)});
    });
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto f1 = std::async(std::launch::async, build_key, 1LL);
  auto f2 = std::async(std::launch::async, build_key, 2LL);
  CHECK(f1.get()->value == 1);
  CHECK(f2.get()->value == 2);
  CHECK(started.load() == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // not one after another

  CHECK_THROWS_AS(
      t.find_or_build(Key{3, 0},
                      []() -> std::unique_ptr<Plan> { throw std::runtime_error("out of memory"); }),
      std::runtime_error);
  CHECK(t.find(Key{3, 0}) == nullptr);
  CHECK(t.find_or_build(Key{3, 0}, [] { return std::make_unique<Plan>(Plan{3}); })->value == 3);
}
