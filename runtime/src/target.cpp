#include "kjit/op/target.hpp"

#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime.hpp"

namespace kjit {

Target Target::of(const Runtime& rt) {
  Target t;
  t.arch = rt.arch();
  t.cc = rt.props().cc();
  t.sm_count = rt.props().sm_count;
  t.max_smem_per_block = rt.props().max_smem_per_block_optin;
  return t;
}

Target Target::for_arch(const std::string& arch, int sm_count) {
  if (sm_count < 1)
    throw Error(Errc::InvalidArgument,
                "Target: sm_count = " + std::to_string(sm_count) + " must be >= 1");
  Target t;
  t.cc = Compiler::arch_sm(arch);  // InvalidArgument naming the arch for anything else
  t.arch = arch;
  t.sm_count = sm_count;
  return t;
}

// Configs are plain arithmetic on the cc: no check against what this NVRTC can target (a config
// for sm_60 is computable, only compiling it is not).
Target Target::for_cc(int cc, int sm_count) {
  if (cc < 10 || sm_count < 1)
    throw Error(Errc::InvalidArgument, "Target: cc = " + std::to_string(cc) +
                                           " and sm_count = " + std::to_string(sm_count) +
                                           " must be a compute capability (>= 10) and >= 1");
  Target t;
  t.arch = "sm_" + std::to_string(cc);
  t.cc = cc;
  t.sm_count = sm_count;
  return t;
}

}  // namespace kjit
