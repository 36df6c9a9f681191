// The remote cache tier: a Redis server shared by a fleet, behind the disk cache (docs/API.md,
// "Remote cache"). Pure C++17 (hiredis, OpenSSL), no CUDA.
//
// Every value is kjit's entry format (key copy, version, SHA-256) signed with HMAC-SHA256 under
// a fleet key, so that whoever can write to the Redis cannot choose the code a process runs: an
// unsigned, badly signed, truncated, oversized or misplaced value is refused and counted, never
// served. Every operation is bounded by a timeout, and after repeated failures the tier switches
// itself off for a back-off period (a circuit breaker): a dead or slow server costs a first call
// at most one timeout and a loaded kernel nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kjit/cache/key.hpp"

namespace kjit::cache {

struct Entry;

// Where the server is, parsed from redis://[[user]:password@]host[:port][/db] (rediss:// only
// when the hiredis kjit was built with has TLS, which Debian 12's 0.14 has not).
struct RemoteUrl {
  bool tls = false;
  std::string user;      // empty: the default user (AUTH <password>)
  std::string password;  // empty: no AUTH; never printed (see redacted())
  std::string host;      // a name, an IPv4 address or a [bracketed] IPv6 address, unbracketed here
  int port = 6379;
  int db = 0;
  // Throws std::invalid_argument naming the part that is wrong and the rule (the password is
  // never part of the message).
  static RemoteUrl parse(const std::string& url);
  std::string redacted() const;  // "redis://user:***@host:port/db"
};

struct RemoteOptions {
  // "" = no remote tier. From KJIT_REMOTE_CACHE.
  std::string url;
  // The fleet key (at least 32 bytes; its bytes are the HMAC key), from KJIT_REMOTE_CACHE_KEY, or
  // read from key_file (KJIT_REMOTE_CACHE_KEY_FILE) when `key` is empty. A URL without a key is
  // refused: nothing can be verified without one, so a read-only tier cannot be had either.
  std::string key;
  std::string key_file;
  std::chrono::milliseconds connect_timeout{50};  // KJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS
  std::chrono::milliseconds op_timeout{50};       // KJIT_REMOTE_CACHE_TIMEOUT_MS
  // Consecutive failures that open the circuit breaker, and how long it then stays open.
  int failures_to_open = 3;
  std::chrono::milliseconds backoff{30000};  // KJIT_REMOTE_CACHE_BACKOFF_MS
  uint64_t max_value_bytes = 64ull << 20;    // larger values are neither published nor read
  size_t publish_queue = 64;                 // pending publishes; more are dropped (counted)
  // The fleet's compile lease (KJIT_REMOTE_CACHE_LEASE_MS; 0 = none): on a miss, the first
  // process to ask compiles, and the others wait for its value, at most this long, instead of
  // compiling the same kernel too. A lease expires by itself (a compiler that died holds it no
  // longer than this), and a failed compile gives it back at once.
  std::chrono::milliseconds lease{2000};
  std::string prefix = "kjit:v1:";  // Redis key = prefix + the cache key's hex
  // A malformed KJIT_REMOTE_CACHE_* number seen by from_env() (which never throws: it fills a
  // default argument); the RemoteCache constructor throws it.
  std::string env_problem;

  // KJIT_REMOTE_CACHE, KJIT_REMOTE_CACHE_KEY, KJIT_REMOTE_CACHE_KEY_FILE and the timeouts above.
  static RemoteOptions from_env();
};

struct RemoteStats {
  uint64_t hits = 0;       // values found, verified and served
  uint64_t misses = 0;     // no value under the key (FLUSHALL, eviction, never published)
  uint64_t refused = 0;    // values found and refused: unsigned, bad signature, corrupt, wrong key
  uint64_t oversized = 0;  // values over max_value_bytes: read (refused) or not published
  uint64_t errors = 0;     // connect, AUTH, timeout or protocol failures
  uint64_t skipped = 0;    // lookups and publishes not tried while the breaker was open
  uint64_t breaker_opens = 0;
  uint64_t published = 0, publish_dropped = 0;  // dropped: queue full, breaker open, shut down
  uint64_t get_us_total = 0, get_us_max = 0;    // lookup latency (tried lookups only)
  uint64_t gets = 0;                            // tried lookups (hits + misses + refused + errors)
  uint64_t leases = 0;       // misses this process compiled holding the fleet's lease
  uint64_t lease_waits = 0;  // misses that waited for another process's compile
  uint64_t lease_wait_us = 0;
};

struct RemoteServerInfo {
  uint64_t ping_us = 0;
  std::string version, used_memory, maxmemory_policy, keyspace;  // from INFO
  std::map<std::string, uint64_t> fleet;  // the summed RemoteStats of processes that ended
};

class RemoteCache {
 public:
  // Throws std::invalid_argument for a malformed URL, a missing or short key, or a key file that
  // is not a regular file of this user's (or root's) readable by no one else. Connects lazily.
  explicit RemoteCache(RemoteOptions opts);
  ~RemoteCache();  // finishes the publishes queued (each bounded by the timeouts, the breaker)
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  // The verified entry stored under `key`, or nullopt (miss, refused, error, breaker open). Never
  // throws; bounded by connect_timeout + op_timeout. *missed (when given) is true only when the
  // server answered that it has no value: a failure is not a miss.
  std::optional<Entry> get(const Key& key, bool* missed = nullptr);
  // After a miss that the caller will fill by compiling: takes the fleet's lease on `key` (then
  // *mine is true and nullopt is returned: compile, then publish, or release() on failure), or,
  // when another process holds it, polls for that process's value, at most RemoteOptions::lease:
  // the verified entry, or nullopt (compile) once the lease is gone or the tier fails. Never
  // throws.
  std::optional<Entry> claim_or_wait(const Key& key, bool* mine);
  void release(const Key& key);  // gives a lease back (the compile failed)
  // Queued for the background publisher (never blocks on the network); false when dropped.
  bool publish(const Key& key, const Entry& entry);
  // Synchronous publish (tools): true when the server stored it, else false and *why.
  bool publish_now(const Key& key, const Entry& entry, std::string* why = nullptr);
  // Waits until the queue is empty (tools, tests), at most `limit`. True when it emptied.
  bool flush(std::chrono::milliseconds limit);

  RemoteStats stats() const;
  const std::string& where() const;  // the redacted URL
  // What kjit-cache stats shows of the server: one PING's round trip, a few INFO fields and the
  // fleet-wide counters every process adds to the hash <prefix>stats when it ends. nullopt and
  // *why when the server cannot be reached.
  std::optional<RemoteServerInfo> server_info(std::string* why);
  // Every cache key stored under the prefix (SCAN; kjit-cache pull). nullopt and *why on failure.
  std::optional<std::vector<Key>> keys(std::string* why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kjit::cache
