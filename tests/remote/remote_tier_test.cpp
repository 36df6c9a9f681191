// The remote tier against a real redis-server, in one process: hits that land on disk, and every
// fault the issue lists (the server killed, paused, a wrong password, nothing listening, values
// truncated, bit-flipped, unsigned, signed with another key, under another key, oversized, of
// another type, FLUSHALL): each time the right result and nothing bad on disk.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../../cache/src/entry_format.hpp"  // private: hostile values are built directly
#include "../../cache/src/remote_value.hpp"
#include "cache/test_util.hpp"
#include "kjit/cache/disk_cache.hpp"
#include "redis_server.hpp"

using namespace kjit::cache;
using kjit_test::entry_of;
using kjit_test::key_of;
using kjit_test::RedisServer;
using kjit_test::same_entry;
using kjit_test::TempDir;

namespace {

const std::string kFleetKey = "0123456789abcdef0123456789abcdef-fleet";

Options with_remote(const std::string& dir, const std::string& url) {
  Options o = kjit_test::options_for(dir);
  o.quiet = true;
  o.remote.url = url;
  o.remote.key = kFleetKey;
  o.remote.connect_timeout = std::chrono::milliseconds(100);
  o.remote.op_timeout = std::chrono::milliseconds(100);
  o.remote.backoff = std::chrono::milliseconds(300);
  return o;
}

std::string redis_name(const Key& k) {
  return "kjit:v1:" + k.hex();
}

// Nothing at all for `k` in the disk cache folder: no entry, valid or not.
bool nothing_on_disk(const std::string& dir, const Key& k) {
  return !kjit_test::exists(kjit_test::entry_path(dir, k));
}

// A cache of its own (folder `dir`) asks the server for `k`: the remote counter that moved.
RemoteStats lookup(const std::string& dir, const std::string& url, const Key& k,
                   std::optional<Entry>* out) {
  DiskCache c(with_remote(dir, url));
  *out = c.get(k);
  return c.remote()->stats();
}

}  // namespace

TEST_CASE("redis: a put is published; another cache's miss is served, verified, written to disk") {
  RedisServer server;
  TempDir a, b;
  const Key k = key_of("kernel A");
  const Entry e = entry_of(std::string(5000, 'c'), "kernel A [sm_90]");
  {
    DiskCache writer(with_remote(a.path(), server.url()));
    CHECK(writer.put(k, e));
    REQUIRE(writer.remote()->flush(std::chrono::seconds(5)));
    CHECK(writer.remote()->stats().published == 1);
  }
  CHECK(!server.get(redis_name(k)).empty());
  DiskCache reader(with_remote(b.path(), server.url()));
  std::optional<Entry> got = reader.get(k);
  REQUIRE(got);
  CHECK(same_entry(*got, e));
  const RemoteStats s = reader.remote()->stats();
  CHECK(s.hits == 1);
  CHECK(s.gets == 1);
  CHECK(reader.stats().misses == 1);  // the disk's miss
  // Written to disk: a cache with no remote tier now has it.
  DiskCache offline(kjit_test::options_for(b.path()));
  REQUIRE(offline.get(k));
  CHECK(same_entry(*offline.get(k), e));
  // get_or_make asks the server before making.
  TempDir c;
  DiskCache third(with_remote(c.path(), server.url()));
  bool made = true;
  const Entry m = third.get_or_make(
      k, [] { return entry_of("never"); }, &made);
  CHECK_FALSE(made);
  CHECK(same_entry(m, e));
  CHECK(third.stats().compiles == 0);
}

TEST_CASE("redis: hostile or damaged values are refused, counted, and never reach the disk") {
  RedisServer server;
  const Key k = key_of("victim");
  const Entry good = entry_of(std::string(3000, 'g'));
  const std::string sealed = detail::seal_value(kFleetKey, k, good);
  const std::string evil_entry = detail::serialize_entry(k, entry_of("evil code"));
  std::string flipped = sealed;
  flipped[sealed.size() / 2] ^= 0x10;
  const struct {
    const char* what;
    std::string value;
  } cases[] = {
      {"truncated", sealed.substr(0, sealed.size() - 100)},
      {"bit-flipped", flipped},
      {"unsigned (a disk entry as is)", evil_entry},
      {"signed with another key",
       detail::seal_value(std::string(40, 'z'), k, entry_of("evil code"))},
      {"signed for another key", detail::seal_value(kFleetKey, key_of("other"), good)},
      {"garbage", std::string("\x00\x01not a value", 13)},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    server.set(redis_name(k), c.value);
    TempDir dir;
    std::optional<Entry> got;
    const RemoteStats s = lookup(dir.path(), server.url(), k, &got);
    CHECK_FALSE(got);
    CHECK(s.refused == 1);
    CHECK(s.hits == 0);
    CHECK(nothing_on_disk(dir.path(), k));
  }
  SUBCASE("a value of another type") {
    server.command({"DEL", redis_name(k)});
    server.command({"LPUSH", redis_name(k), "x"});
    TempDir dir;
    std::optional<Entry> got;
    CHECK(lookup(dir.path(), server.url(), k, &got).refused == 1);
    CHECK_FALSE(got);
  }
  SUBCASE("an oversized value is refused after reading at most the limit") {
    server.set(redis_name(k), sealed);
    TempDir dir;
    Options o = with_remote(dir.path(), server.url());
    o.remote.max_value_bytes = sealed.size() - 1;
    DiskCache cache(o);
    CHECK_FALSE(cache.get(k));
    CHECK(cache.remote()->stats().oversized == 1);
    CHECK(cache.remote()->stats().refused == 1);
    CHECK(nothing_on_disk(dir.path(), k));
    // ... and a put that large is not published.
    const Key k2 = key_of("big");
    CHECK(cache.put(k2, good));
    REQUIRE(cache.remote()->flush(std::chrono::seconds(5)));
    CHECK(cache.remote()->stats().oversized == 2);
    CHECK(cache.remote()->stats().published == 0);
    CHECK(server.get(redis_name(k2)).empty());
  }
  SUBCASE("the good value is served (the cases above fail for their fault alone)") {
    server.set(redis_name(k), sealed);
    TempDir dir;
    std::optional<Entry> got;
    CHECK(lookup(dir.path(), server.url(), k, &got).hits == 1);
    REQUIRE(got);
    CHECK(same_entry(*got, good));
  }
}

namespace {

// A cache's own check (Options::check): entries must carry this cache owner's seal.
class SealedBy : public EntryCheck {
 public:
  explicit SealedBy(std::string who) : who_(std::move(who)) {}
  std::string problem(const Key& key, const Entry& e) const override {
    const std::string* seal = e.find("seal");
    return seal && *seal == who_ + key.hex() ? "" : "not sealed by " + who_;
  }
  void seal(const Key& key, Entry* e) const override {
    e->metadata.emplace_back("seal", who_ + key.hex());
  }

 private:
  std::string who_;
};

}  // namespace

TEST_CASE("redis: a remote value passes the cache's own check too, and is published sealed") {
  RedisServer server;
  TempDir a, b, c;
  const Key k = key_of("checked");
  {
    DiskCache unchecked(with_remote(a.path(), server.url()));  // publishes without a seal
    REQUIRE(unchecked.put(k, entry_of("from a cache without the check")));
    REQUIRE(unchecked.remote()->flush(std::chrono::seconds(5)));
  }
  Options o = with_remote(b.path(), server.url());
  o.check = std::make_shared<SealedBy>("team ");
  {
    DiskCache checked(o);
    CHECK_FALSE(checked.get(k));  // signed by the fleet, but not what this cache's check accepts
    CHECK(checked.remote()->stats().hits == 1);
    CHECK(checked.stats().untrusted == 1);
    CHECK(nothing_on_disk(b.path(), k));  // not laundered by put_local's seal either
    bool made = false;
    const Entry e = checked.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    CHECK(made);
    CHECK(e.payload == "compiled here");
    REQUIRE(checked.remote()->flush(std::chrono::seconds(5)));
  }
  Options o2 = with_remote(c.path(), server.url());
  o2.check = std::make_shared<SealedBy>("team ");
  DiskCache peer(o2);  // the same check elsewhere: the published value carries the seal
  const std::optional<Entry> got = peer.get(k);
  REQUIRE(got);
  CHECK(got->payload == "compiled here");
  CHECK(peer.stats().untrusted == 0);
}

TEST_CASE("redis: FLUSHALL between calls is a miss, then the next publish heals it") {
  RedisServer server;
  TempDir a, b, c;
  const Key k = key_of("flushed");
  const Entry e = entry_of("payload");
  DiskCache writer(with_remote(a.path(), server.url()));
  writer.put(k, e);
  REQUIRE(writer.remote()->flush(std::chrono::seconds(5)));
  server.command({"FLUSHALL"});
  std::optional<Entry> got;
  CHECK(lookup(b.path(), server.url(), k, &got).misses == 1);
  CHECK_FALSE(got);
  writer.put(k, e);
  REQUIRE(writer.remote()->flush(std::chrono::seconds(5)));
  CHECK(lookup(c.path(), server.url(), k, &got).hits == 1);
  CHECK(got);
}

TEST_CASE("redis: a wrong password or no server is an error; the breaker then skips the tier") {
  RedisServer server("s3cret-pass");
  TempDir dir;
  const Key k = key_of("k");
  {
    DiskCache cache(with_remote(dir.path(), server.url("wrong-pass")));
    CHECK_FALSE(cache.get(k));
    CHECK(cache.remote()->stats().errors == 1);
  }
  {
    DiskCache cache(with_remote(dir.path(), server.url()));  // the right one
    CHECK_FALSE(cache.get(k));
    CHECK(cache.remote()->stats().misses == 1);
    CHECK(cache.remote()->stats().errors == 0);
  }
  const kjit_test::ClosedPort dead;  // refuses connections; no other suite can take it
  DiskCache cache(with_remote(dir.path(), "redis://127.0.0.1:" + std::to_string(dead.port())));
  for (int i = 0; i < 10; ++i) CHECK_FALSE(cache.get(key_of("k" + std::to_string(i))));
  const RemoteStats s = cache.remote()->stats();
  CHECK(s.errors == 3);  // failures_to_open
  CHECK(s.breaker_opens == 1);
  CHECK(s.skipped == 7);
  CHECK(s.gets == 3);
  // A put still reaches the disk; its publish is dropped while the breaker is open.
  CHECK(cache.put(k, entry_of("x")));
  CHECK(cache.remote()->stats().publish_dropped >= 1);
  CHECK(cache.get(k));  // a disk hit
}

TEST_CASE("redis: the server killed mid-run, then back: misses, a rest, then hits again") {
  RedisServer server;
  TempDir a, b;
  DiskCache cache(with_remote(a.path(), server.url()));
  const Key k1 = key_of("one"), k2 = key_of("two");
  cache.put(k1, entry_of("1"));
  cache.put(k2, entry_of("2"));
  REQUIRE(cache.remote()->flush(std::chrono::seconds(5)));
  Options o = with_remote(b.path(), server.url());
  o.remote.failures_to_open = 1;
  DiskCache reader(o);
  REQUIRE(reader.get(k1));  // its pooled connection now dies with the server
  server.kill();
  CHECK_FALSE(reader.get(k2));
  CHECK(reader.remote()->stats().errors == 1);
  CHECK(reader.remote()->stats().breaker_opens == 1);
  CHECK(nothing_on_disk(b.path(), k2));
  server.restart();  // empty: no persistence
  std::this_thread::sleep_for(o.remote.backoff + std::chrono::milliseconds(50));
  CHECK_FALSE(reader.get(k2));
  CHECK(reader.remote()->stats().misses == 1);  // reached the new server
  cache.put(k2, entry_of("2"));
  REQUIRE(cache.remote()->flush(std::chrono::seconds(5)));
  TempDir c;
  std::optional<Entry> got;
  CHECK(lookup(c.path(), server.url(), k2, &got).hits == 1);
}

TEST_CASE("redis: a paused server (SIGSTOP) is one failed lookup, then the tier rests") {
  RedisServer server;
  TempDir dir;
  Options o = with_remote(dir.path(), server.url());
  o.remote.failures_to_open = 1;
  o.remote.backoff = std::chrono::seconds(60);
  DiskCache cache(o);
  CHECK_FALSE(cache.get(key_of("warm")));  // connected
  server.pause();
  CHECK_FALSE(cache.get(key_of("a")));
  CHECK_FALSE(cache.get(key_of("b")));
  CHECK(cache.put(key_of("c"), entry_of("c")));  // the disk still works
  server.resume();
  const RemoteStats s = cache.remote()->stats();
  CHECK(s.errors == 1);
  CHECK(s.skipped >= 1);
  CHECK(s.gets == 2);  // how long one took is measured by kjit_remote_bench
  // Bounded by the timeouts (100 ms each here), with room for a loaded machine: a lookup that
  // blocked on the paused server would take until it resumed.
  CHECK(s.get_us_max < 2000000);
  CHECK(cache.get(key_of("c")));  // from disk
}

TEST_CASE("redis: after the back-off one call probes a paused server; other threads are skipped") {
  RedisServer server;
  TempDir dir;
  Options o = with_remote(dir.path(), server.url());
  o.remote.failures_to_open = 1;
  o.remote.backoff = std::chrono::milliseconds(200);
  o.remote.op_timeout = std::chrono::milliseconds(500);  // the probe's wait: all threads arrive
  DiskCache cache(o);
  CHECK_FALSE(cache.get(key_of("warm")));  // connected: a miss
  server.pause();
  CHECK_FALSE(cache.get(key_of("opens")));  // one timeout: the breaker opens
  REQUIRE(cache.remote()->stats().breaker_opens == 1);
  std::this_thread::sleep_for(o.remote.backoff + std::chrono::milliseconds(50));
  constexpr int kThreads = 8;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go) std::this_thread::yield();
      cache.get(key_of("thread " + std::to_string(t)));
    });
  go = true;
  for (auto& th : threads) th.join();
  server.resume();
  const RemoteStats s = cache.remote()->stats();
  CHECK(s.errors == 2);  // the first timeout and the probe's, not one per thread
  CHECK(s.gets == 3);
  CHECK(s.skipped == kThreads - 1);
  CHECK(s.breaker_opens == 2);
  // Resumed: after the next back-off, one probe succeeds and closes the breaker for everyone.
  std::this_thread::sleep_for(o.remote.backoff + std::chrono::milliseconds(50));
  CHECK_FALSE(cache.get(key_of("probe")));
  CHECK_FALSE(cache.get(key_of("after")));
  CHECK(cache.remote()->stats().misses == 3);
}

TEST_CASE("redis: the fleet's compile lease: one process compiles, the others wait for its value") {
  RedisServer server;
  const Key k = key_of("leased kernel");
  const Entry e = entry_of("the cubin");
  const std::string lease = "kjit:v1:lease:" + k.hex();
  const auto options = [&](const std::string& dir) {
    Options o = with_remote(dir, server.url());
    o.remote.lease = std::chrono::seconds(30);
    return o;
  };
  SUBCASE("the holder's value arrives: the waiter compiles nothing") {
    server.command({"SET", lease, "another host", "PX", "30000"});
    std::thread holder([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      server.set(redis_name(k), detail::seal_value(kFleetKey, k, e));
    });
    TempDir dir;
    DiskCache waiter(options(dir.path()));
    bool made = true;
    const Entry got = waiter.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    holder.join();
    CHECK_FALSE(made);
    CHECK(same_entry(got, e));
    CHECK(waiter.remote()->stats().lease_waits == 1);
    CHECK(waiter.remote()->stats().hits == 1);
    CHECK(waiter.remote()->stats().misses == 1);  // the lookup before the lease; polls are not
    CHECK(kjit_test::exists(kjit_test::entry_path(dir.path(), k)));
  }
  SUBCASE("the holder gives the lease back (its compile failed): the waiter compiles") {
    server.command({"SET", lease, "another host", "PX", "30000"});
    std::thread holder([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      server.command({"DEL", lease});
    });
    TempDir dir;
    DiskCache waiter(options(dir.path()));
    bool made = false;
    waiter.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    holder.join();
    CHECK(made);
    CHECK(waiter.remote()->stats().lease_waits == 1);
  }
  SUBCASE("a holder that died: its lease expires, and the waiter compiles") {
    server.command({"SET", lease, "a dead host", "PX", "200"});
    TempDir dir;
    DiskCache waiter(options(dir.path()));
    bool made = false;
    waiter.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    CHECK(made);
  }
  SUBCASE("no one holds it: this process takes it, and gives it back when its compile throws") {
    TempDir dir;
    DiskCache first(options(dir.path()));
    CHECK_THROWS_AS(first.get_or_make(k, []() -> Entry { throw std::runtime_error("no"); }),
                    std::runtime_error);
    CHECK(first.remote()->stats().leases == 1);
    kjit_test::RawReply held = server.command({"EXISTS", lease});
    REQUIRE(held);
    CHECK(held->integer == 0);
    bool made = false;
    first.get_or_make(
        k, [&] { return e; }, &made);  // takes it again, compiles, publishes
    CHECK(made);
    CHECK(first.remote()->stats().leases == 2);
  }
  SUBCASE("a value refused while waiting ends the wait: the waiter compiles at once") {
    server.command({"SET", lease, "another host", "PX", "30000"});
    std::thread writer([&] {  // anyone who can write to the server, while the waiter polls
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      server.set(redis_name(k), detail::seal_value(std::string(40, 'z'), k, e));
    });
    TempDir dir;
    DiskCache waiter(options(dir.path()));
    bool made = false;
    const auto t0 = std::chrono::steady_clock::now();
    const Entry got = waiter.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    const auto waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    writer.join();
    CHECK(made);
    CHECK(got.payload == "compiled here");
    CHECK(waiter.remote()->stats().refused == 1);
    CHECK(waited_ms < 10000);  // not the lease's 30 s
  }
  SUBCASE("the server paused while waiting: one failed poll, then the waiter compiles") {
    server.command({"SET", lease, "another host", "PX", "30000"});
    TempDir dir;
    Options o = options(dir.path());
    o.remote.failures_to_open = 10;  // the breaker stays shut: only the wait's own rule counts
    o.remote.publish_queue = 0;      // no background publish to the paused server: errors are
                                     // the wait's alone
    DiskCache waiter(o);
    std::thread pauser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      server.pause();
    });
    bool made = false;
    waiter.get_or_make(
        k, [] { return entry_of("compiled here"); }, &made);
    pauser.join();
    server.resume();
    CHECK(made);
    CHECK(waiter.remote()->stats().lease_waits == 1);
    CHECK(waiter.remote()->stats().errors == 1);  // not a timeout per poll and per EXISTS
  }
  SUBCASE("lease 0: no lease at all") {
    server.command({"SET", lease, "another host", "PX", "30000"});
    TempDir dir;
    Options o = options(dir.path());
    o.remote.lease = std::chrono::milliseconds(0);
    DiskCache cache(o);
    bool made = false;
    cache.get_or_make(
        k, [&] { return e; }, &made);
    CHECK(made);
    CHECK(cache.remote()->stats().lease_waits == 0);
  }
}

TEST_CASE("redis: a full publish queue drops (counted); a forked child leaves its parent's tier") {
  RedisServer server;
  TempDir dir;
  Options o = with_remote(dir.path(), server.url());
  o.remote.publish_queue = 0;
  {
    DiskCache cache(o);
    CHECK(cache.put(key_of("q"), entry_of("q")));  // on disk all the same
    CHECK(cache.remote()->stats().publish_dropped == 1);
    CHECK(cache.remote()->stats().published == 0);
  }
  CHECK(server.get(redis_name(key_of("q"))).empty());

  DiskCache parent(with_remote(dir.path(), server.url()));
  const Key k = key_of("forked");
  CHECK(parent.put(k, entry_of("f")));
  REQUIRE(parent.remote()->flush(std::chrono::seconds(5)));  // the publisher thread runs
  const int rc = kjit_test::in_child([&] {
    const RemoteStats before = parent.remote()->stats();
    if (parent.remote()->get(k)) return 1;  // not served: the parent's connections are not ours
    if (parent.remote()->publish(k, entry_of("child"))) return 2;
    const RemoteStats after = parent.remote()->stats();
    if (after.skipped != before.skipped + 1 || after.gets != before.gets) return 3;
    return 0;
  });
  CHECK(rc == 0);
  // The parent's tier is untouched by its child.
  TempDir other;
  std::optional<Entry> got;
  CHECK(lookup(other.path(), server.url(), k, &got).hits == 1);
  REQUIRE(got);
  CHECK(got->payload == "f");
  CHECK(parent.get(key_of("never put")) == std::nullopt);
  CHECK(parent.remote()->stats().misses == 1);
}

TEST_CASE("redis: while the server is slow, the publish queue holds at most max_value_bytes") {
  RedisServer server;
  TempDir dir;
  Options o = with_remote(dir.path(), server.url());
  o.remote.max_value_bytes = 1 << 20;
  o.remote.failures_to_open = 100;  // no breaker: the queue's own bound is what drops
  DiskCache cache(o);
  CHECK_FALSE(cache.get(key_of("warm")));  // connected
  server.pause();
  constexpr int kPuts = 12;  // fewer than publish_queue (64): the count alone would take all
  for (int i = 0; i < kPuts; ++i)
    CHECK(cache.put(key_of("big " + std::to_string(i)), entry_of(std::string(300 << 10, 'b'))));
  const RemoteStats s = cache.remote()->stats();
  server.resume();
  // 1 MiB holds three of them, and one more may be in flight: the rest are dropped, counted.
  CHECK(s.publish_dropped >= kPuts - 4);
  CHECK(s.published == 0);
  // An entry that could never be stored is not even queued.
  CHECK(cache.put(key_of("huge"), entry_of(std::string(2 << 20, 'h'))));
  CHECK(cache.remote()->stats().oversized == 1);
  REQUIRE(cache.remote()->flush(std::chrono::seconds(5)));
}

TEST_CASE("redis: threads share one tier: lookups, compiles under the lease, publishes") {
  RedisServer server;
  TempDir a, b;
  constexpr int kThreads = 8, kKeys = 16;
  std::atomic<int> made{0}, wrong{0};
  {
    DiskCache cache(with_remote(a.path(), server.url()));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kKeys; ++i) {
          const int n = (i + t) % kKeys;  // every thread asks for every key, in another order
          const Entry e = cache.get_or_make(key_of("k" + std::to_string(n)), [&] {
            ++made;
            return entry_of("payload " + std::to_string(n));
          });
          if (e.payload != "payload " + std::to_string(n)) ++wrong;
        }
      });
    for (auto& th : threads) th.join();
    REQUIRE(cache.remote()->flush(std::chrono::seconds(10)));
    CHECK(cache.remote()->stats().published == static_cast<uint64_t>(made.load()));
  }
  CHECK(wrong == 0);
  CHECK(made == kKeys);  // the per-key lock, then the disk, serve the other threads
  DiskCache other(with_remote(b.path(), server.url()));
  for (int n = 0; n < kKeys; ++n) {
    const std::optional<Entry> e = other.get(key_of("k" + std::to_string(n)));
    REQUIRE(e);
    CHECK(e->payload == "payload " + std::to_string(n));
  }
  CHECK(other.remote()->stats().hits == kKeys);
}
