// libFuzzer target: kjit-precompile's input parsers (tools/manifest.hpp). Every input is read both
// as a manifest (parse_manifest) and as a --problem value (parse_problem_arg: JSON or the short
// form), and every problem either gives is derived as the tool derives it (problem_specs, i.e. the
// ops' own config heuristics) for a few targets, plus those of the manifest's "archs".
//
// Kernel entries (a recording's, tools/kernel_entry.hpp) go through parse_kernel_entry, their
// headers' texts through a HeaderSource with no bundle (so only kjit's built-ins are found), and
// those whose texts are all found are placed in a compiler and their closure checked.
//
// The documented refusals: ManifestError from parse_manifest, EntryError from parse_problem_arg,
// problem_specs and the kernel entry steps, kjit::Error from parse_target. Any other exception (the
// tool would report an entry without its field, or stop) is a finding, as are crashes, hangs and
// sanitizer reports.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "kernel_entry.hpp"
#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/op/target.hpp"
#include "manifest.hpp"

using kjit::tools::EntryError;
using kjit::tools::ManifestError;
using kjit::tools::OpContext;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_manifest: %s\n", what.c_str());
  std::abort();
}

// Runs f(); an `Allowed` exception is a refusal, anything else a finding.
template <class Allowed, class F>
void expect(const char* call, F f) {
  try {
    f();
  } catch (const Allowed&) {
  } catch (const std::exception& e) {
    fail(std::string(call) + " threw an undocumented exception: " + e.what());
  } catch (...) {
    fail(std::string(call) + " threw a non-std exception");
  }
}

OpContext context(kjit::Target target, bool unaligned, bool all_candidates) {
  OpContext c;
  c.target = std::move(target);
  c.unaligned = unaligned;
  c.all_candidates = all_candidates;
  return c;
}

kjit::Target device(int cc, int sm_count, int64_t max_smem_per_block) {
  kjit::Target t = kjit::Target::for_cc(cc, sm_count);
  t.max_smem_per_block = max_smem_per_block;
  return t;
}

// A kernel entry as kjit-precompile takes it, short of compiling: parsed, its headers' texts
// found (built-ins only: no bundle, no --templates), placed, its closure checked.
void kernel_entry(const nlohmann::json& entry) {
  expect<EntryError>("kernel entry", [&] {
    const kjit::tools::KernelEntry e = kjit::tools::parse_kernel_entry(entry);
    if (e.spec.instantiation().empty() || !e.headers.count(e.spec.header()))
      fail("parse_kernel_entry accepted an entry without its kernel or its header");
    kjit::cache::Options off;
    off.mode = kjit::cache::Mode::Off;
    kjit::Compiler base(off);
    kjit::tools::HeaderSource src({}, "");
    kjit::tools::KernelCompilers compilers(base,
                                           [&] { return std::make_unique<kjit::Compiler>(off); });
    kjit::Compiler& c = compilers.place(e, src);
    kjit::tools::KernelCompilers::check_closure(c, e);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<nlohmann::json> problems;
  // The tool's default target and some corners: sm_80 with every autotune candidate and
  // unaligned pointers, sm_120 (its own staging budget) on a one-SM device with 48 KB per block.
  std::vector<OpContext> contexts = {context(kjit::Target{}, false, false),
                                     context(device(80, 108, 0), true, true),
                                     context(device(120, 1, 48 << 10), false, false)};
  expect<ManifestError>("parse_manifest", [&] {
    const kjit::tools::Manifest m = kjit::tools::parse_manifest(text, "fuzz.json");
    for (size_t i = 0; i < m.problems.size(); ++i) {
      if (m.problems[i].index != i || m.problems[i].name().empty())
        fail("parse_manifest numbered its problems wrong");
      problems.push_back(m.problems[i].problem);
    }
    // Targets the manifest names, as the tool takes them (a few: each costs a pass).
    for (size_t i = 0; i < m.archs.size() && i < 4; ++i)
      expect<kjit::Error>("parse_target", [&] {
        contexts.push_back(context(kjit::tools::parse_target(m.archs[i]), false, false));
      });
  });
  expect<EntryError>("parse_problem_arg",
                     [&] { problems.push_back(kjit::tools::parse_problem_arg(text)); });
  for (const nlohmann::json& p : problems) {
    if (kjit::tools::is_kernel_entry(p)) {
      kernel_entry(p);
      continue;
    }
    for (const OpContext& ctx : contexts)
      expect<EntryError>("problem_specs", [&] { kjit::tools::problem_specs(p, ctx); });
  }
  return 0;
}
