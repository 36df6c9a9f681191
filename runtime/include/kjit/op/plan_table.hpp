// Op support: a table from a small POD key to a plan, built once per key. Lookups take a shared
// lock only for the find (no allocation, no hashing of sources); callers launch after the lock is
// gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <type_traits>
#include <unordered_map>

namespace kjit::op {

template <class Key>
struct PodHash {
  size_t operator()(const Key& k) const noexcept {
    // Eight bytes a step (keys have no padding: PlanTable checks): every call hashes its key,
    // and the table hashes its neighbours' keys while walking a bucket. Byte-wise FNV-1a over a
    // 168-byte key cost ~2000 instructions a call (tests/host/bench/host_bench.cpp). The final
    // mix folds the high bits down: the multiplies only carry upward, and a change in a word's
    // top bits could otherwise cancel one in the next word's low bits.
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
    uint64_t h = sizeof(Key) * kMul;
    size_t i = 0;
    for (; i + 8 <= sizeof(Key); i += 8) h = step(h, word(p + i, 8), kMul);
    if (i < sizeof(Key)) h = step(h, word(p + i, sizeof(Key) - i), kMul);
    h = (h ^ (h >> 33)) * kMul;
    return static_cast<size_t>(h ^ (h >> 29));
  }

 private:
  static uint64_t word(const unsigned char* p, size_t n) noexcept {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    return w;
  }
  static uint64_t step(uint64_t h, uint64_t w, uint64_t mul) noexcept {
    return (((h << 5) | (h >> 59)) ^ w) * mul;
  }
};

template <class Key>
struct PodEqual {
  bool operator()(const Key& a, const Key& b) const noexcept {
    return std::memcmp(&a, &b, sizeof(Key)) == 0;
  }
};

template <class Key, class Plan>
class PlanTable {
  // Hashed and compared as bytes: padding (bytes no initializer sets) would split one key in two.
  static_assert(std::has_unique_object_representations_v<Key>, "a key without padding");

 public:
  const Plan* find(const Key& k) const { return find(Hashed{PodHash<Key>{}(k), k}); }
  // Builds each key once: a thread that finds the key being built waits for that build (an
  // autotune times every candidate: two at once would take twice as long and time each other).
  // Different keys build in parallel, outside the table's lock (a build may compile for a
  // while). A build that throws leaves nothing: the next caller builds again.
  const Plan* find_or_build(const Key& k, const std::function<std::unique_ptr<Plan>()>& build) {
    const Hashed h{PodHash<Key>{}(k), k};
    if (const Plan* p = find(h)) return p;
    std::shared_ptr<std::mutex> gate;
    {
      std::unique_lock lock(mu_);
      std::shared_ptr<std::mutex>& g = building_[h];
      if (!g) g = std::make_shared<std::mutex>();
      gate = g;
    }
    std::lock_guard<std::mutex> once(*gate);
    if (const Plan* p = find(h)) return p;  // built while this thread waited
    std::unique_ptr<Plan> plan = build();
    std::unique_lock lock(mu_);
    const Plan* out = map_.emplace(h, std::move(plan)).first->second.get();
    building_.erase(h);
    return out;
  }

 private:
  // A key with its hash, computed once per call: walking a bucket then compares stored hashes
  // (libstdc++ keeps none of its own for a hash it deems cheap, and rehashed each neighbour).
  struct Hashed {
    size_t hash;
    Key key;
  };
  struct HashedHash {
    size_t operator()(const Hashed& h) const noexcept { return h.hash; }
  };
  struct HashedEqual {
    bool operator()(const Hashed& a, const Hashed& b) const noexcept {
      return a.hash == b.hash && PodEqual<Key>{}(a.key, b.key);
    }
  };
  const Plan* find(const Hashed& h) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(h);
    return it == map_.end() ? nullptr : it->second.get();
  }

  mutable std::shared_mutex mu_;
  std::unordered_map<Hashed, std::unique_ptr<Plan>, HashedHash, HashedEqual> map_;
  std::unordered_map<Hashed, std::shared_ptr<std::mutex>, HashedHash, HashedEqual> building_;
};

}  // namespace kjit::op
