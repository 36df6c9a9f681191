// RemoteCache's state, shared by its sources (remote_cache.cpp: lookups, publishing;
// remote_admin.cpp: what the tools ask of the server).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "circuit_breaker.hpp"
#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/remote_cache.hpp"
#include "redis_client.hpp"

namespace kjit::cache {

struct RemoteCache::Impl {
  RemoteOptions opts;
  RemoteUrl url;
  std::string key;  // the fleet key: never printed
  std::string where;
  pid_t pid;  // a forked child uses nothing its parent made (connections, the publisher thread)
  detail::CircuitBreaker breaker;

  // Idle connections: a caller takes one (or opens one) and gives it back; no lock is held
  // across network I/O.
  std::mutex pool_mu;
  std::vector<std::unique_ptr<detail::RedisConnection>> idle;

  struct Pending {
    Key key;
    Entry entry;
    uint64_t bytes;  // entry_bytes(entry)
  };
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<Pending> queue;
  // The queue's entries' bytes: at most max_value_bytes (beyond one entry), so that a slow server
  // cannot make publish_queue entries of up to max_value_bytes each pile up in memory.
  uint64_t queued_bytes = 0;
  bool in_flight = false, stopping = false;
  std::thread publisher;  // started by the first publish

  std::atomic<uint64_t> hits{0}, misses{0}, refused{0}, oversized{0}, errors{0}, skipped{0};
  std::atomic<uint64_t> breaker_opens{0}, published{0}, publish_dropped{0};
  std::atomic<uint64_t> get_us_total{0}, get_us_max{0}, gets{0};
  std::atomic<uint64_t> leases{0}, lease_waits{0}, lease_wait_us{0};
  std::atomic<bool> warned{false};

  explicit Impl(RemoteOptions o);

  std::string redis_key(const Key& k) const { return opts.prefix + k.hex(); }
  std::string lease_key(const Key& k) const { return opts.prefix + "lease:" + k.hex(); }
  bool forked() const;
  // A connection, from the pool or new; nullptr after counting a failure.
  std::unique_ptr<detail::RedisConnection> take(bool* pooled, std::string* why);
  void give_back(std::unique_ptr<detail::RedisConnection> c);
  // One command on a pooled connection, with the breaker's bookkeeping. nullptr on failure.
  detail::Reply run(const std::vector<std::string_view>& args, std::string* why);
  void note_failure(const std::string& why);
  // SET; counts published/oversized. False and *why when it was not stored.
  bool store(const Key& key, const Entry& entry, std::string* why);
  // One GETRANGE of `k`, verified and counted (a miss only when not `polling` for a lease).
  // *missed (when given): the server answered that there is no value.
  std::optional<Entry> lookup(const Key& k, bool polling, bool* missed = nullptr);
  void publisher_loop();
  RemoteStats snapshot() const;
  void send_fleet_counters();
};

}  // namespace kjit::cache
