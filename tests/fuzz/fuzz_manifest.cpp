// libFuzzer target: kjit-precompile's input parsers (tools/manifest.hpp). Every input is read both
// as a manifest (parse_manifest) and as a --problem value (parse_problem_arg: JSON or the short
// form), and every problem either gives is derived as the tool derives it (problem_specs, i.e. the
// ops' own config heuristics) for a few targets, plus those of the manifest's "archs".
//
// The documented refusals: ManifestError from parse_manifest, EntryError from parse_problem_arg and
// problem_specs, kjit::Error from parse_target. Any other exception (the tool would report an entry
// without its field, or stop) is a finding, as are crashes, hangs and sanitizer reports.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

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
  for (const nlohmann::json& p : problems)
    for (const OpContext& ctx : contexts)
      expect<EntryError>("problem_specs", [&] { kjit::tools::problem_specs(p, ctx); });
  return 0;
}
