// Op support: an op's specs_for from its configs_for. Several configs can compile to the same
// kernel (a capture fallback equal to an autotune candidate, two bias variants sharing the
// broadcast kernel): each specialization is listed once, in the configs' order.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kjit/spec.hpp"

namespace kjit::op {

// to_specs(config) -> std::vector<Spec>: every kernel one config launches.
template <class Config, class ToSpecs>
std::vector<Spec> distinct_specs(const std::vector<Config>& configs, ToSpecs to_specs) {
  std::vector<Spec> out;
  std::vector<std::string> seen;
  for (const Config& c : configs)
    for (Spec& s : to_specs(c))
      if (std::find(seen.begin(), seen.end(), s.instantiation()) == seen.end()) {
        seen.push_back(s.instantiation());
        out.push_back(std::move(s));
      }
  return out;
}

}  // namespace kjit::op
