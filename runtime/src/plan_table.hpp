// A table from a small POD key to a plan, built once per key. Lookups take a shared lock only
// for the find (no allocation, no hashing of sources); callers launch after the lock is gone.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace kjit::detail {

template <class Key>
struct PodHash {
  size_t operator()(const Key& k) const noexcept {
    // FNV-1a over the key's bytes; keys are value-initialized so padding is zero.
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    size_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
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
 public:
  const Plan* find(const Key& k) const {
    std::shared_lock lock(mu_);
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : it->second.get();
  }
  // Builds outside the lock (a build may compile for a while), so different keys build in
  // parallel; two threads racing on one key share its kernel (Runtime::kernel compiles each
  // specialization once) and the first insert wins.
  const Plan* find_or_build(const Key& k, const std::function<std::unique_ptr<Plan>()>& build) {
    if (const Plan* p = find(k)) return p;
    std::unique_ptr<Plan> plan = build();
    std::unique_lock lock(mu_);
    return map_.emplace(k, std::move(plan)).first->second.get();
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<Key, std::unique_ptr<Plan>, PodHash<Key>, PodEqual<Key>> map_;
};

}  // namespace kjit::detail
