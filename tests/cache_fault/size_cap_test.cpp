// The size cap holds under many insertions, evicting the least recently used entries.
#include <doctest/doctest.h>

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
