// A circuit breaker for the remote tier (private to kjit_cache): after `failures_to_open`
// failures in a row, calls are refused for `backoff`; then one call is let through (half open),
// and its failure opens the breaker again at once. Lock-free: checked on every remote call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kjit::cache::detail {

class CircuitBreaker {
 public:
  CircuitBreaker(int failures_to_open, std::chrono::milliseconds backoff)
      : threshold_(failures_to_open < 1 ? 1 : failures_to_open),
        backoff_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(backoff).count()) {}

  bool allow() const { return now_ns() >= open_until_ns_.load(std::memory_order_relaxed); }
  void success() { failures_.store(0, std::memory_order_relaxed); }
  // True when this failure opened the breaker.
  bool failure() {
    if (failures_.fetch_add(1, std::memory_order_relaxed) + 1 < threshold_) return false;
    // Half open after the back-off: one more failure reopens it.
    failures_.store(threshold_ - 1, std::memory_order_relaxed);
    open_until_ns_.store(now_ns() + backoff_ns_, std::memory_order_relaxed);
    return true;
  }

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  const int threshold_;
  const int64_t backoff_ns_;
  std::atomic<int> failures_{0};
  std::atomic<int64_t> open_until_ns_{0};
};

}  // namespace kjit::cache::detail
