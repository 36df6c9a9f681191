// A circuit breaker for the remote tier (private to kjit_cache): after `failures_to_open`
// failures in a row, calls are refused for `backoff`; then one call is let through (half open),
// and its failure opens the breaker again at once, its success closes it. Lock-free: checked on
// every remote call. "One call" holds across threads: the first caller after the back-off moves
// the deadline on (compare-and-swap), so the threads that arrive while that probe waits for a
// dead server are refused rather than each paying a timeout of their own.
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

  // Whether a call may use the server now; true after the back-off makes the caller the probe.
  bool allow() {
    int64_t until = open_until_ns_.load(std::memory_order_relaxed);
    if (until == kClosed) return true;
    const int64_t now = now_ns();
    if (now < until) return false;
    return open_until_ns_.compare_exchange_strong(until, now + backoff_ns_,
                                                  std::memory_order_relaxed);
  }
  // Whether calls are refused now (takes no probe: for queueing work a later allow() gates).
  bool resting() const {
    const int64_t until = open_until_ns_.load(std::memory_order_relaxed);
    return until != kClosed && now_ns() < until;
  }
  void success() {
    failures_.store(0, std::memory_order_relaxed);
    open_until_ns_.store(kClosed, std::memory_order_relaxed);
  }
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
  static constexpr int64_t kClosed = 0;  // open_until_ns_ of a closed breaker

  const int threshold_;
  const int64_t backoff_ns_;
  std::atomic<int> failures_{0};
  std::atomic<int64_t> open_until_ns_{kClosed};
};

}  // namespace kjit::cache::detail
