// The fleet's compile lease: on a miss, one process compiles a kernel and the others wait for its
// value (bounded by RemoteOptions::lease), so that a cold fleet compiles each kernel once.
#include <unistd.h>

#include <string>
#include <thread>

#include "remote_impl.hpp"

namespace kjit::cache {

using detail::Reply;

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

// Who holds a lease, for a person reading the server (nothing depends on it).
std::string holder() {
  static const std::string id = [] {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + std::to_string(::getpid());
  }();
  return id;
}

}  // namespace

std::optional<Entry> RemoteCache::claim_or_wait(const Key& k, bool* mine) {
  Impl& m = *impl_;
  *mine = false;
  if (m.opts.lease.count() == 0 || m.forked() || !m.breaker.allow()) return std::nullopt;
  try {
    std::string why;
    const std::string lease = m.lease_key(k), ms = std::to_string(m.opts.lease.count());
    Reply r = m.run({"SET", lease, holder(), "NX", "PX", ms}, &why);
    if (!r || r->type == REDIS_REPLY_ERROR) return std::nullopt;  // compile: the tier cannot tell
    if (r->type == REDIS_REPLY_STATUS) {                          // "OK": the lease is ours
      *mine = true;
      ++m.leases;
      return std::nullopt;
    }
    // Nil: another process is compiling it. Its value, or nothing once its lease is gone.
    ++m.lease_waits;
    const int64_t t0 = detail::CircuitBreaker::now_ns();
    const int64_t until = t0 + std::chrono::nanoseconds(m.opts.lease).count();
    std::optional<Entry> got;
    // Only clean answers keep a waiter waiting: a failed command (a paused server) would cost a
    // timeout per poll, and a value that is refused (anyone may write one under the key) would
    // hold every waiter for the whole lease. Either way this process compiles at once.
    while (detail::CircuitBreaker::now_ns() < until) {
      std::this_thread::sleep_for(kPollInterval);
      bool missed = false;
      if ((got = m.lookup(k, true, &missed)) || !missed) break;
      Reply held = m.run({"EXISTS", lease}, &why);
      if (!held || held->type != REDIS_REPLY_INTEGER) break;
      if (held->integer == 0) {
        got = m.lookup(k, true);  // published just before the lease went
        break;
      }
    }
    m.lease_wait_us += static_cast<uint64_t>((detail::CircuitBreaker::now_ns() - t0) / 1000);
    return got;
  } catch (const std::exception&) {  // bad_alloc: compile
    return std::nullopt;
  }
}

void RemoteCache::release(const Key& k) {
  Impl& m = *impl_;
  if (m.forked() || !m.breaker.allow()) return;
  std::string why;
  const std::string lease = m.lease_key(k);
  m.run({"DEL", lease}, &why);  // another's lease taken after ours expired goes too: harmless
}

}  // namespace kjit::cache
