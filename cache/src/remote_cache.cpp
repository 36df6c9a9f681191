// The remote tier's lookups and publishes: a pool of connections, the circuit breaker, and one
// background publisher thread with a bounded queue.
#include "kjit/cache/remote_cache.hpp"

#include <unistd.h>

#include <stdexcept>

#include "cache_dir.hpp"
#include "remote_impl.hpp"
#include "remote_value.hpp"

namespace kjit::cache {

using detail::Reply;

namespace {

constexpr size_t kMaxIdle = 4;  // connections kept per process; more are opened when needed
constexpr uint64_t kMaxValueLimit = 1ull << 30;  // the largest max_value_bytes accepted

uint64_t elapsed_us(int64_t t0_ns) {
  return static_cast<uint64_t>((detail::CircuitBreaker::now_ns() - t0_ns) / 1000);
}

uint64_t entry_bytes(const Entry& e) {
  uint64_t n = e.payload.size() + e.label.size();
  for (const auto& kv : e.metadata) n += kv.first.size() + kv.second.size();
  return n;
}

void raise_max(std::atomic<uint64_t>& m, uint64_t v) {
  uint64_t cur = m.load(std::memory_order_relaxed);
  while (v > cur && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

RemoteCache::Impl::Impl(RemoteOptions o)
    : opts(std::move(o)),
      url(RemoteUrl::parse(opts.url)),
      key(detail::fleet_key(opts)),
      where(url.redacted()),
      pid(::getpid()),
      breaker(opts.failures_to_open, opts.backoff) {
  if (!opts.env_problem.empty()) throw std::invalid_argument(opts.env_problem);
  if (opts.prefix.empty() || opts.prefix.size() > 200)
    throw std::invalid_argument("the remote cache's key prefix must be 1 to 200 bytes");
  if (opts.max_value_bytes < detail::kRemoteHeaderSize)
    throw std::invalid_argument("the remote cache's max_value_bytes is too small for any value");
  // A value is read whole into memory, and GETRANGE's end is a signed 64-bit number on the
  // server: an "unlimited" UINT64_MAX would make every lookup a refused command.
  if (opts.max_value_bytes > kMaxValueLimit)
    throw std::invalid_argument("the remote cache's max_value_bytes (" +
                                std::to_string(opts.max_value_bytes) + ") is over " +
                                std::to_string(kMaxValueLimit) + " (1 GiB)");
  // A zero timeout would make hiredis block without one.
  const auto in_range = [](std::chrono::milliseconds v, int64_t least) {
    return v.count() >= least && v.count() <= 600000;
  };
  if (!in_range(opts.connect_timeout, 1) || !in_range(opts.op_timeout, 1))
    throw std::invalid_argument(
        "the remote cache's connect_timeout and op_timeout must be 1 to 600000 ms");
  if (!in_range(opts.backoff, 0) || !in_range(opts.lease, 0))
    throw std::invalid_argument("the remote cache's backoff and lease must be 0 to 600000 ms");
  if (opts.failures_to_open < 1)
    throw std::invalid_argument("the remote cache's failures_to_open must be at least 1");
}

bool RemoteCache::Impl::forked() const {
  return ::getpid() != pid;
}

void RemoteCache::Impl::note_failure(const std::string& why) {
  ++errors;
  if (breaker.failure()) ++breaker_opens;
  if (!warned.exchange(true))
    detail::warn("remote cache " + where + ": " + why + " (kjit compiles instead; later " +
                 "failures are only counted, and after " + std::to_string(opts.failures_to_open) +
                 " in a row the tier rests for " + std::to_string(opts.backoff.count()) + " ms)");
}

std::unique_ptr<detail::RedisConnection> RemoteCache::Impl::take(bool* pooled, std::string* why) {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    *pooled = !idle.empty();
    if (*pooled) {
      auto c = std::move(idle.back());
      idle.pop_back();
      return c;
    }
  }
  return detail::RedisConnection::open(url, opts.connect_timeout, opts.op_timeout, why);
}

void RemoteCache::Impl::give_back(std::unique_ptr<detail::RedisConnection> c) {
  if (!c || c->broken()) return;
  std::lock_guard<std::mutex> lock(pool_mu);
  if (idle.size() < kMaxIdle) idle.push_back(std::move(c));
}

Reply RemoteCache::Impl::run(const std::vector<std::string_view>& args, std::string* why) {
  bool pooled = false;
  auto conn = take(&pooled, why);
  Reply r = conn ? conn->command(args, why) : nullptr;
  // An idle connection that the server closed meanwhile (it restarted, or dropped idle clients)
  // fails at once: one fresh try. A timeout is not retried: a call pays at most one.
  if (!r && pooled && !conn->timed_out()) {
    conn = detail::RedisConnection::open(url, opts.connect_timeout, opts.op_timeout, why);
    r = conn ? conn->command(args, why) : nullptr;
  }
  if (!r) {
    note_failure(*why);
    return nullptr;  // the broken connection is dropped with `conn`
  }
  breaker.success();
  give_back(std::move(conn));
  return r;
}

bool RemoteCache::Impl::store(const Key& k, const Entry& entry, std::string* why) {
  std::string value;
  try {
    value = detail::seal_value(key, k, entry);
  } catch (const std::exception& e) {  // bad_alloc, or OpenSSL failing
    ++publish_dropped;
    *why = e.what();
    return false;
  }
  if (value.size() > opts.max_value_bytes) {
    ++oversized;
    *why = std::to_string(value.size()) + " bytes signed, over the limit of " +
           std::to_string(opts.max_value_bytes);
    return false;
  }
  if (!breaker.allow()) {
    ++skipped;
    ++publish_dropped;
    *why = "the tier rests after repeated failures";
    return false;
  }
  Reply r = run({"SET", redis_key(k), value}, why);
  if (r && r->type == REDIS_REPLY_ERROR) {  // OOM under maxmemory-policy noeviction, READONLY
    ++errors;
    *why = "SET refused: " + std::string(r->str, r->len);
  }
  if (!r || r->type == REDIS_REPLY_ERROR) {
    ++publish_dropped;
    return false;
  }
  ++published;
  return true;
}

RemoteCache::RemoteCache(RemoteOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

RemoteCache::~RemoteCache() {
  Impl& m = *impl_;
  if (m.forked()) {
    // The parent's thread does not exist here and its locks may be held: touch nothing.
    if (m.publisher.joinable()) (void)new std::thread(std::move(m.publisher));
    (void)impl_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m.queue_mu);
    m.stopping = true;
  }
  m.queue_cv.notify_all();
  if (m.publisher.joinable()) m.publisher.join();
  m.send_fleet_counters();
}

std::optional<Entry> RemoteCache::get(const Key& k, bool* missed) {
  Impl& m = *impl_;
  bool ignored = false;
  if (!missed) missed = &ignored;
  *missed = false;
  if (m.forked() || !m.breaker.allow()) {
    ++m.skipped;
    return std::nullopt;
  }
  const int64_t t0 = detail::CircuitBreaker::now_ns();
  std::optional<Entry> out = m.lookup(k, false, missed);
  const uint64_t us = elapsed_us(t0);
  m.get_us_total += us;
  raise_max(m.get_us_max, us);
  ++m.gets;
  return out;
}

std::optional<Entry> RemoteCache::Impl::lookup(const Key& k, bool polling, bool* missed) {
  try {
    std::string why;
    // GETRANGE reads at most one byte more than the limit: a huge value costs no more than that.
    const std::string last = std::to_string(opts.max_value_bytes);
    Reply r = run({"GETRANGE", redis_key(k), "0", last}, &why);
    if (!r) return std::nullopt;  // counted by run()
    const std::string_view text(r->str ? r->str : "", r->str ? r->len : 0);
    if (r->type == REDIS_REPLY_STRING && r->len == 0) {
      if (missed) *missed = true;
      if (!polling) ++misses;
    } else if (r->type == REDIS_REPLY_STRING && r->len > opts.max_value_bytes) {
      ++oversized;
      ++refused;
    } else if (r->type == REDIS_REPLY_STRING) {
      Entry e;
      if (detail::open_value(key, k, text, &e) == detail::ValueStatus::Ok) {
        ++hits;
        return e;
      }
      ++refused;
    } else if (r->type == REDIS_REPLY_ERROR && text.rfind("WRONGTYPE", 0) == 0) {
      ++refused;  // someone stored a list or hash under a kjit key
    } else {
      ++errors;
    }
  } catch (const std::exception&) {  // bad_alloc on a large reply: a failed lookup
    ++errors;
  }
  return std::nullopt;
}

bool RemoteCache::publish(const Key& k, const Entry& entry) {
  Impl& m = *impl_;
  if (m.forked()) {
    ++m.publish_dropped;
    return false;
  }
  const uint64_t bytes = entry_bytes(entry);
  if (bytes > m.opts.max_value_bytes) {  // could never be stored: not even copied
    ++m.oversized;
    return false;
  }
  std::lock_guard<std::mutex> lock(m.queue_mu);
  if (m.stopping || m.queue.size() >= m.opts.publish_queue || m.breaker.resting() ||
      (!m.queue.empty() && m.queued_bytes + bytes > m.opts.max_value_bytes)) {
    ++m.publish_dropped;
    return false;
  }
  bool queued = false;
  try {
    m.queue.push_back({k, entry, bytes});
    m.queued_bytes += bytes;
    queued = true;
    if (!m.publisher.joinable()) m.publisher = std::thread([&m] { m.publisher_loop(); });
  } catch (const std::exception&) {  // bad_alloc, or no thread could be made
    if (queued) {
      m.queue.pop_back();
      m.queued_bytes -= bytes;
    }
    ++m.publish_dropped;
    return false;
  }
  m.queue_cv.notify_one();
  return true;
}

void RemoteCache::Impl::publisher_loop() {
  std::unique_lock<std::mutex> lock(queue_mu);
  for (;;) {
    queue_cv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty()) return;  // stopping, and everything queued was tried
    Pending p = std::move(queue.front());
    queue.pop_front();
    queued_bytes -= p.bytes;
    in_flight = true;
    lock.unlock();
    std::string why;              // counted; the first failure of the tier was printed once
    store(p.key, p.entry, &why);  // bounded by the timeouts; dropped while the breaker is open
    lock.lock();
    in_flight = false;
    queue_cv.notify_all();
  }
}

bool RemoteCache::publish_now(const Key& k, const Entry& entry, std::string* why) {
  std::string ignored;
  if (!why) why = &ignored;
  if (impl_->forked()) {
    *why = "a forked child does not use its parent's remote tier";
    return false;
  }
  return impl_->store(k, entry, why);
}

bool RemoteCache::flush(std::chrono::milliseconds limit) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.queue_mu);
  return m.queue_cv.wait_for(lock, limit, [&] { return m.queue.empty() && !m.in_flight; });
}

RemoteStats RemoteCache::Impl::snapshot() const {
  RemoteStats s;
  s.hits = hits;
  s.misses = misses;
  s.refused = refused;
  s.oversized = oversized;
  s.errors = errors;
  s.skipped = skipped;
  s.breaker_opens = breaker_opens;
  s.published = published;
  s.publish_dropped = publish_dropped;
  s.get_us_total = get_us_total;
  s.get_us_max = get_us_max;
  s.gets = gets;
  s.leases = leases;
  s.lease_waits = lease_waits;
  s.lease_wait_us = lease_wait_us;
  return s;
}

RemoteStats RemoteCache::stats() const {
  return impl_->snapshot();
}

const std::string& RemoteCache::where() const {
  return impl_->where;
}

}  // namespace kjit::cache
