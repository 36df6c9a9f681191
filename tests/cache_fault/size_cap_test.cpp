// The size cap holds under many insertions, evicting the least recently used entries.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

TEST_CASE("1000 insertions into a 1 MB cap: cap holds, oldest evicted, recently used kept") {
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 1 << 20;
  DiskCache cache(o);
  constexpr int kInserts = 1000, kHot = 10;
  std::vector<Key> keys;
  for (int i = 0; i < kInserts; ++i) keys.push_back(key_of("cap" + std::to_string(i)));

  uint64_t max_seen = 0;
  for (int i = 0; i < kInserts; ++i) {
    REQUIRE(cache.put(keys[i], entry_of(std::string(4000, char('a' + i % 26)))));
    // As if entry i had been written i seconds after the first: a clear LRU order that does not
    // depend on the filesystem's timestamp granularity.
    age_file(entry_path(tmp.path(), keys[i]), 100000 - i);
    // The first kHot keys are in use: a hit refreshes them (the LRU clock).
    if (i % 50 == 49)
      for (int h = 0; h < kHot; ++h) REQUIRE(cache.get(keys[h]));
    if (i % 10 == 0) max_seen = std::max(max_seen, cache.total_bytes());
  }
  const uint64_t total = cache.total_bytes();
  CHECK(total <= o.max_bytes);
  CHECK(max_seen <= o.max_bytes);
  CHECK(total >= o.max_bytes / 2);  // trimmed to ~90%, not emptied

  std::vector<bool> present(kInserts);
  for (int i = 0; i < kInserts; ++i) present[i] = exists(entry_path(tmp.path(), keys[i]));
  for (int h = 0; h < kHot; ++h) CHECK_MESSAGE(present[h], "hot key " << h << " was evicted");
  // The survivors among the others are exactly the most recently written ones.
  int first_kept = kInserts;
  while (first_kept > kHot && present[first_kept - 1]) --first_kept;
  for (int i = kHot; i < first_kept; ++i)
    CHECK_MESSAGE(!present[i], "key " << i << " kept out of order");
  CHECK(first_kept > kInserts / 2);
  CHECK(present[kInserts - 1]);
  const int evicted = kInserts - kHot - (kInserts - first_kept);
  CHECK(cache.stats().evictions == uint64_t(evicted));
  MESSAGE("kept " << kInserts - evicted << " entries, " << total << " bytes; evicted " << evicted);
  for (const auto& info : cache.list(true)) CHECK(info.valid);
}

// Long-lived processes each count only their own puts between scans. Four caches on one folder
// (as four processes would be), each writing under the cap by its own count: together they must
// still keep the folder near the cap, not four times over it.
TEST_CASE("several writers on one folder keep it near the cap") {
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 1 << 20;
  constexpr int kWriters = 4, kEach = 225;  // ~4 KB entries: ~0.9 MB per writer
  std::vector<std::unique_ptr<DiskCache>> caches;
  for (int w = 0; w < kWriters; ++w) caches.push_back(std::make_unique<DiskCache>(o));
  for (int i = 0; i < kEach; ++i)
    for (int w = 0; w < kWriters; ++w) {
      const Key k = key_of("writer" + std::to_string(w) + "/" + std::to_string(i));
      REQUIRE(caches[w]->put(k, entry_of(std::string(4000, char('a' + w)))));
      age_file(entry_path(tmp.path(), k), 100000 - (i * kWriters + w));
    }
  const uint64_t on_disk = DiskCache(o).total_bytes();
  MESSAGE(on_disk << " bytes on disk for a cap of " << o.max_bytes);
  // Each writer rescans after 1/16 of the cap: at most kWriters/16 of the cap over it.
  CHECK(on_disk <= o.max_bytes + o.max_bytes * kWriters / 16);
  uint64_t evictions = 0;
  for (const auto& c : caches) evictions += c->stats().evictions;
  CHECK(evictions > 0);
}

namespace {

// `count` entries of `bytes` each, the oldest in the cache, in shard folders made read-only for
// the guard's lifetime: entries a trim may not delete (not for root, who may).
class StuckEntries {
 public:
  StuckEntries(const std::string& dir, const Options& o, int count, size_t bytes) {
    DiskCache cache(o);
    for (int i = 0; i < count; ++i) {
      const Key k = key_of("stuck" + std::to_string(i));
      REQUIRE(cache.put(k, entry_of(std::string(bytes, 's'))));
      age_file(entry_path(dir, k), 200000 + i);
      shards_.push_back(dir + "/v1/" + k.hex().substr(0, 2));
    }
    for (const std::string& d : shards_) REQUIRE(::chmod(d.c_str(), 0555) == 0);
  }
  ~StuckEntries() {
    for (const std::string& d : shards_) ::chmod(d.c_str(), 0755);
  }

 private:
  std::vector<std::string> shards_;
};

bool skip_as_root() {
  if (::geteuid() != 0) return false;
  MESSAGE("skipped: root may delete from a read-only folder");
  return true;
}

}  // namespace

// A trim that cannot delete an entry (a shard folder it may not write) must still count its
// bytes: it deletes newer entries instead, and the folder ends under the cap.
TEST_CASE("entries the trim cannot delete still count toward the cap") {
  if (skip_as_root()) return;
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 100 << 10;
  uint64_t on_disk = 0;
  {
    StuckEntries stuck(tmp.path(), o, 12, 1000);
    DiskCache cache(o);
    for (int i = 0; i < 100; ++i) {
      const Key k = key_of("fresh" + std::to_string(i));
      if (cache.put(k, entry_of(std::string(4000, 'f'))))
        age_file(entry_path(tmp.path(), k), 100000 - i);
    }
    on_disk = cache.total_bytes();
  }
  MESSAGE(on_disk << " bytes on disk for a cap of " << o.max_bytes);
  CHECK(on_disk <= o.max_bytes);
}

// When the entries a trim may not delete exceed its target on their own, no deletion can reach
// it: the trim stops there instead of emptying the cache of every newer entry.
TEST_CASE("a trim that cannot reach its target keeps the newer entries") {
  if (skip_as_root()) return;
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 100 << 10;
  StuckEntries stuck(tmp.path(), o, 24, 4000);  // ~98 KB: over the trim's ~90% target
  DiskCache cache(o);
  int stored = 0, kept = 0;
  for (int i = 0; i < 40; ++i) {
    const Key k = key_of("fresh" + std::to_string(i));
    if (!cache.put(k, entry_of(std::string(1000, 'f')))) continue;  // a locked shard
    ++stored;
    kept += exists(entry_path(tmp.path(), k));  // not deleted by the trim its own put ran
  }
  CHECK(stored > 0);
  CHECK(kept == stored);
}

// prune is asked to remove what it can: entries it may not delete do not stop it.
TEST_CASE("prune removes every entry it may delete, past the ones it may not") {
  if (skip_as_root()) return;
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 0;  // no automatic trim
  StuckEntries stuck(tmp.path(), o, 4, 1000);
  DiskCache cache(o);
  uint64_t stored = 0;
  for (int i = 0; i < 20; ++i)
    stored += cache.put(key_of("fresh" + std::to_string(i)), entry_of(std::string(1000, 'f')));
  REQUIRE(stored > 0);
  CHECK(cache.prune(uint64_t{0}, std::nullopt) == stored);
  CHECK(cache.list().size() == 4u);  // the stuck ones
}
