#include "manifest.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "kjit/activation.hpp"
#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"
#include "op_fields.hpp"
#include "tool_util.hpp"

namespace kjit::tools {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The two seed workloads (docs/ARCHITECTURE.md). JSON has no comments, hence the C++ ones.
const char* const kDefaultManifest = R"({
  "problems": [
    {"op": "group_norm", "dtype": "f32", "layout": "nchw", "shape": [8, 256, 24, 24],
     "groups": 32, "activation": "silu", "affine": true},
    {"op": "linear_gn_min", "dtype": "f32", "M": 1024, "K": 8192, "N": 8192, "groups": 512}
  ]
})";

// The first value in `v` that parse_json marked (a number out of range, an object with a key
// given twice), depth first.
std::optional<std::string> find_mark(const json& v) {
  if (auto m = json_mark(v)) return m;
  if (v.is_structured())
    for (const json& e : v)
      if (auto m = find_mark(e)) return m;
  return std::nullopt;
}

// Whether `line` is one JSON Lines entry: a whole JSON object with "op" or "kernel".
bool entry_line(const std::string& line) {
  try {
    const json j = parse_json(line, BadValues::Mark);
    return j.is_object() && (j.contains("op") || j.contains("kernel"));
  } catch (const JsonError&) {
    return false;
  }
}

// JSON Lines (a recording): the first line that is not blank is an entry, or it is torn (a
// recorder killed mid-line) and the second is one, in a text that is not one JSON document. A
// classic manifest's first line ("{", or a one-line {"problems": ...}) is no entry.
bool json_lines(const std::string& text) {
  std::vector<std::string> first;  // the first two lines that are not blank
  for (size_t pos = 0, nl; pos < text.size() && first.size() < 2; pos = nl + 1) {
    nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (line.find_first_not_of(" \t\r") != std::string::npos) first.push_back(std::move(line));
  }
  if (first.empty()) return false;
  if (entry_line(first[0])) return true;
  if (first.size() < 2 || !entry_line(first[1])) return false;
  try {
    parse_json(first[0], BadValues::Mark);
    return false;  // a whole first line that is no entry: not a recording
  } catch (const JsonError&) {
  }
  try {
    parse_json(text, BadValues::Mark);
    return false;
  } catch (const JsonError&) {
    return true;
  }
}

Manifest parse_json_lines(const std::string& text, const std::string& source) {
  Manifest m;
  size_t line_no = 0;
  for (size_t pos = 0, nl; pos < text.size(); pos = nl + 1) {
    nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    ++line_no;
    const std::string line = text.substr(pos, nl - pos);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ProblemEntry e{source, m.problems.size(), json(), line_no, ""};
    try {
      e.problem = parse_json(line, BadValues::Mark);
    } catch (const JsonError& err) {
      e.error = err.what();
    }
    m.problems.push_back(std::move(e));
  }
  return m;
}

}  // namespace

// A problem holding a marked value fails alone, naming the field that holds it.
void check_marks(const json& problem) {
  if (auto m = json_mark(problem)) throw EntryError("", *m);
  if (!problem.is_object()) return;
  for (auto it = problem.begin(); it != problem.end(); ++it)
    if (auto m = find_mark(it.value())) throw EntryError(it.key(), *m);
}

namespace {

// A short-form token that looks like a shape (digits and signs around x's: "8x256x24x24") as its
// dims, else nullopt. A dim that is no 64-bit integer is an error naming it, rather than "not a
// dtype, a layout..."; a negative one passes, for the op to report as it does in JSON shapes.
std::optional<json> short_dims(const std::string& token) {
  if (token.find_first_of("xX") == std::string::npos ||
      token.find_first_of("0123456789") == std::string::npos ||
      token.find_first_not_of("0123456789xX+-.eE") != std::string::npos)
    return std::nullopt;
  json dims = json::array();
  for (size_t pos = 0;;) {
    const size_t x = token.find_first_of("xX", pos);
    const std::string part = token.substr(pos, x == std::string::npos ? x : x - pos);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec == std::errc::result_out_of_range)
      throw EntryError("shape",
                       "dimension " + part + " of " + token + " is out of range (at most 2^63-1)");
    if (ec != std::errc() || end != part.data() + part.size())
      throw EntryError("shape", "dimension '" + part + "' of " + token + " is not an integer");
    dims.push_back(v);
    if (x == std::string::npos) return dims;
    pos = x + 1;
  }
}

// A short-form value: true/false, a shape, a number as JSON reads it (so that 1e400 or 2.5 meet
// the field's own check as the numbers they are), else the text as a string.
json short_value(const std::string& val) {
  const std::string lv = lower(val);
  if (lv == "true" || lv == "false") return lv == "true";
  if (auto dims = short_dims(val)) return *dims;
  int64_t i = 0;
  const auto [end, ec] = std::from_chars(val.data(), val.data() + val.size(), i);
  if (!val.empty() && ec == std::errc() && end == val.data() + val.size()) return i;  // also 007
  if (!val.empty() && val.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    try {
      json n = parse_json(val, BadValues::Mark);
      if (n.is_number() || json_mark(n)) return n;
    } catch (const JsonError&) {  // "1.2.3": the string, which the field reports as ill-typed
    }
  }
  return val;
}

// One short-form token (after the op name) as the field it sets and its value.
std::pair<std::string, json> short_field(const std::string& t) {
  const std::string lt = lower(t);
  if (const size_t eq = t.find('='); eq != std::string::npos) {
    std::string key = t.substr(0, eq);
    if (key.empty()) throw EntryError("", "token '" + t + "' has no key before '='");
    if (key == "g" || key == "G") key = "groups";
    return {key, short_value(t.substr(eq + 1))};
  }
  if (auto dims = short_dims(t)) return {"shape", *dims};
  if (lt == "nchw" || lt == "nhwc") return {"layout", lt};
  try {  // the activation names are kjit::parse_activation's, so a new one needs no change here
    return {"activation", activation_name(parse_activation(lt))};
  } catch (const Error&) {  // not an activation: one of the tokens below
  }
  if (lt == "affine" || lt == "noaffine" || lt == "no-affine") return {"affine", lt == "affine"};
  try {
    return {"dtype", dtype_name(parse_dtype(lt))};
  } catch (const Error&) {
    throw EntryError("", "token '" + t +
                             "' is not a dtype (f32, f16, bf16), a layout (nchw, nhwc), a shape "
                             "(8x256x24x24), an activation (none, silu, gelu, gelu_tanh, "
                             "relu), affine, noaffine, or key=value");
  }
}

}  // namespace

std::string ProblemEntry::name() const {
  if (line > 0) return source + ": line " + std::to_string(line);
  if (source == "--problem") return source + "[" + std::to_string(index) + "]";
  return source + ": problems[" + std::to_string(index) + "]";
}

OpSpecs problem_specs(const json& problem, const OpContext& ctx) {
  check_marks(problem);
  if (!problem.is_object()) throw EntryError("", "must be a JSON object, got " + shown(problem));
  if (!problem.contains("op")) throw EntryError("op", "missing (the op's name, e.g. group_norm)");
  const json& op = problem.at("op");
  if (!op.is_string()) throw EntryError("op", "must be a string, got " + shown(op));
  const std::string name = op.get<std::string>();
  // A recording's variant switches for this entry (kjit/op/record.hpp), fields of no op: taken
  // off before the op parses the rest.
  json fields = problem;
  bool aligned = true, autotune = false;
  for (const char* key : {"aligned", "autotune"}) {
    if (!fields.contains(key)) continue;
    const json& v = fields.at(key);
    if (!v.is_boolean()) throw EntryError(key, "must be true or false, got " + shown(v));
    (std::string(key) == "aligned" ? aligned : autotune) = v.get<bool>();
    fields.erase(key);
  }
  std::unique_ptr<kjit::op::OpProblem> p;
  try {
    p = kjit::op::find_op(name).parse(op_fields(fields, name));
  } catch (const Error& e) {
    if (e.code() == Errc::NotFound) throw EntryError("op", e.what());
    if (e.code() != Errc::InvalidArgument) throw;
    throw EntryError(e.field(), e.what());
  }
  // The op's own specs_for for the pointer alignments asked for (aligned first, the op's
  // preference within each), without duplicates.
  OpSpecs out;
  out.describe = p->describe();
  std::set<std::string> seen;
  for (const bool a : {true, false}) {
    if (!(a ? ctx.aligned && aligned : ctx.unaligned || !aligned)) continue;
    std::vector<Spec> specs;
    try {  // a pinned config the op refuses on this target is the entry's error, by its field
      specs = p->specs_for(ctx.target, a, ctx.all_candidates || autotune);
    } catch (const Error& e) {
      if (e.code() != Errc::InvalidArgument) throw;
      throw EntryError(e.field(), e.what());
    }
    for (Spec& s : specs)
      if (seen.insert(s.instantiation()).second) out.specs.push_back(std::move(s));
  }
  return out;
}

Manifest parse_manifest(const std::string& text, const std::string& source) {
  if (json_lines(text)) return parse_json_lines(text, source);
  json j;
  try {
    j = parse_json(text, BadValues::Mark);  // a bad number fails its problem, not the file
  } catch (const JsonError& e) {
    throw ManifestError(source + ": " + e.what());
  }
  if (auto mark = json_mark(j)) throw ManifestError(source + ": " + *mark);
  Manifest m;
  const json* problems = &j;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "problems" && it.key() != "archs")
        throw ManifestError(source + ": unknown top-level field '" + it.key() +
                            "' (known: problems, archs)");
    if (!j.contains("problems")) throw ManifestError(source + ": no \"problems\" array");
    problems = &j.at("problems");
    if (j.contains("archs")) {
      const json& a = j.at("archs");
      if (!a.is_array()) throw ManifestError(source + ": \"archs\" must be an array of strings");
      for (const json& s : a) {
        if (auto mark = json_mark(s)) throw ManifestError(source + ": \"archs\": " + *mark);
        if (!s.is_string()) throw ManifestError(source + ": \"archs\" must be an array of strings");
        m.archs.push_back(s.get<std::string>());
      }
    }
  }
  if (!problems->is_array())
    throw ManifestError(source + ": \"problems\" must be an array of problem objects");
  for (size_t i = 0; i < problems->size(); ++i)
    m.problems.push_back(ProblemEntry{source, i, problems->at(i), 0, ""});
  return m;
}

Manifest load_manifest_file(const std::string& path) {
  std::string text;
  try {
    text = path == "-" ? read_text(std::cin, "<stdin>") : read_text_file(path);
  } catch (const Error& e) {
    throw ManifestError(std::string(e.what()) + " (the manifest)");
  }
  return parse_manifest(text, path == "-" ? "<stdin>" : path);
}

const std::string& default_manifest_text() {
  static const std::string text = kDefaultManifest;
  return text;
}

Manifest default_manifest() {
  return parse_manifest(default_manifest_text(), "default manifest");
}

json parse_problem_arg(const std::string& text) {
  size_t first = text.find_first_not_of(" \t\n");
  if (first != std::string::npos && text[first] == '{') {
    try {
      return parse_json(text, BadValues::Mark);  // marked values fail in problem_specs
    } catch (const JsonError& e) {
      throw EntryError("", e.what());
    }
  }
  std::istringstream ss(text);
  std::vector<std::string> tokens{std::istream_iterator<std::string>(ss),
                                  std::istream_iterator<std::string>()};
  if (tokens.empty()) throw EntryError("op", "empty problem");
  json j;
  j["op"] = tokens[0];
  for (size_t i = 1; i < tokens.size(); ++i) {
    auto [key, value] = short_field(tokens[i]);
    if (j.contains(key))
      throw EntryError(key, "given twice (token '" + tokens[i] + "', had " + shown(j[key]) + ")");
    j[key] = std::move(value);
  }
  return j;
}

kjit::Target parse_target(const std::string& arch) {
  // "sm_90:114": the arch and the SM count of the device it is for (configs that spread work
  // across SMs depend on it), so that one run can precompile for a mixed fleet.
  const size_t colon = arch.find(':');
  if (colon == std::string::npos) return kjit::Target::for_arch(arch);
  const std::string count = arch.substr(colon + 1);
  const bool digits = !count.empty() && count.size() <= 6 &&
                      count.find_first_not_of("0123456789") == std::string::npos;
  const int sms = digits ? std::stoi(count) : 0;
  if (sms < 1 || sms > kMaxSmCount)
    throw kjit::Error(kjit::Errc::InvalidArgument,
                      "target '" + arch + "': the SM count after ':' must be an integer in [1, " +
                          std::to_string(kMaxSmCount) + "]");
  return kjit::Target::for_arch(arch.substr(0, colon), sms);
}

}  // namespace kjit::tools
