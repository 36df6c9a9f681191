// kjit-precompile's input: manifests of problems, each turned into the exact specializations the
// runtime would compile for it by its op's entry in the runtime's op registry
// (kjit/op/registry.hpp), and the target archs. An op registered there needs nothing here.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>
#include "kjit/op/target.hpp"

#include "kjit/spec.hpp"

namespace kjit::tools {

// A problem entry that cannot be used: `field` names the offending field ("" when the entry as a
// whole is wrong, e.g. not an object).
class EntryError : public std::runtime_error {
 public:
  EntryError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A manifest that cannot be read at all (missing file, invalid JSON, no "problems" array).
class ManifestError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One problem and where it came from, for error messages: "<source>: problems[<index>]".
struct ProblemEntry {
  std::string source;  // a manifest path, "default manifest", or "--problem"
  size_t index = 0;    // position in its source's "problems" array (or among --problem options)
  nlohmann::json problem;
  size_t line = 0;           // its line in a JSON Lines manifest (a recording), 0 otherwise
  std::string error;         // a line that is not JSON: why (the entry fails alone)
  std::string name() const;  // "ci.json: problems[3]", "--problem[0]", "rec.jsonl: line 7"
};

struct Manifest {
  std::vector<ProblemEntry> problems;
  std::vector<std::string> archs;  // the manifest's optional "archs" (empty when absent)
};

// {"problems": [ {...}, ... ], "archs": ["sm_90"]}, a bare array of problems, or JSON Lines
// (what a recording writes, kjit/record.hpp): one problem or kernel entry per line, recognized
// by a first line that is a whole JSON object without "problems". In JSON Lines a line that is not
// JSON (a recorder killed mid-line) fails alone; blank lines are skipped.
Manifest parse_manifest(const std::string& text, const std::string& source);
Manifest load_manifest_file(const std::string& path);  // "-" reads stdin
const std::string& default_manifest_text();
Manifest default_manifest();

// A --problem value: a JSON object, or the short form
//   "<op> [dtype] [layout] [NxCxHxW] [activation] [affine|noaffine] [key=value ...]"
// e.g. "group_norm f32 nchw 8x256x24x24 g=32 silu". Returns the JSON object the op reads.
// Throws EntryError (field "" for an unparsable token).
nlohmann::json parse_problem_arg(const std::string& text);

// What an op needs to know about the target and the variants asked for.
struct OpContext {
  // The device the kernels are for: its cc and SM count (heuristics that spread work use it; an
  // arch does not fix it: 132 on H100/H200 SXM, 114 on H100 PCIe, ...).
  kjit::Target target;
  bool aligned = true;          // specializations for 16-byte aligned pointers (the common case)
  bool unaligned = false;       // ... and for pointers that are not 16-byte aligned
  bool all_candidates = false;  // every autotune candidate, not only the heuristic's pick
};

struct OpSpecs {
  std::string describe;     // the problem, as the op's describe() prints it
  std::vector<Spec> specs;  // without duplicates; empty when the runtime launches nothing
};

// Throws EntryError for a value parse_json marked (a number out of range, a key given twice),
// naming the top-level field that holds it.
void check_marks(const nlohmann::json& entry);

// Looks up problem["op"] in the op registry and derives its specializations through the op's
// specs_for. Two fields of any problem are kjit's, not the op's (a recording writes them):
// "aligned": false derives the variants for pointers that are not 16-byte aligned instead of the
// aligned ones (as --unaligned does for every entry), "autotune": true every autotune candidate
// (as --all-candidates). Throws EntryError naming the field for a missing, unknown or invalid
// field.
OpSpecs problem_specs(const nlohmann::json& problem, const OpContext& ctx);

// The most SMs a target may name, as "sm_90:N" or --sm-count (a typo's bound, not a device's).
constexpr int kMaxSmCount = 100000;

// A compile target: "sm_90" -> cc 90, "sm_90a" -> 90, "sm_100f" -> 100, "compute_90" -> 90 (PTX),
// with the default SM count (Target::kDefaultSmCount), or "sm_90:114" for a device of 114 SMs
// (1 .. kMaxSmCount).
kjit::Target parse_target(const std::string& arch);

}  // namespace kjit::tools
