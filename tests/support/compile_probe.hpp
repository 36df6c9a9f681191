// NVRTC compiles into a throwaway disk cache, counted and timed for the suites' summaries.
#pragma once

#include <algorithm>
#include <string>

#include "kjit/compiler.hpp"
#include "test_util.hpp"

namespace kjit_test {

class CompileProbe {
 public:
  CompileProbe() : compiler_(cache_in(dir_.path)) {}

  kjit::CompiledKernel compile(const kjit::Spec& s, const std::string& arch) {
    kjit::CompiledKernel k = compiler_.compile(s, arch);
    ++count_;
    total_ms_ += k.compile_ms;
    max_ms_ = std::max(max_ms_, k.compile_ms);
    return k;
  }
  int count() const { return count_; }
  std::string summary(const std::string& what) const {
    return std::to_string(count_) + " " + what + " compiled, mean " +
           std::to_string(count_ ? total_ms_ / count_ : 0.0) + " ms, max " +
           std::to_string(max_ms_) + " ms";
  }

 private:
  TempDir dir_;  // declared first: the compiler's cache lives in it
  kjit::Compiler compiler_;
  int count_ = 0;
  double total_ms_ = 0, max_ms_ = 0;
};

}  // namespace kjit_test
