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

#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "tool_util.hpp"

namespace kjit::tools {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Reads the fields of one problem. The op names every field it knows up front, so that one it
// does not know (a typo such as "group") is reported as such before anything else.
class Fields {
 public:
  Fields(const json& j, std::string op, std::initializer_list<const char*> known)
      : j_(j), op_(std::move(op)) {
    std::set<std::string> names(known.begin(), known.end());
    names.insert("op");
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (names.count(it.key())) continue;
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw EntryError(it.key(), "unknown field for op " + op_ + " (known: " + list + ")");
    }
  }

  const json& require(const std::string& name) {
    if (!j_.contains(name)) throw EntryError(name, "missing (op " + op_ + " needs it)");
    return j_.at(name);
  }

  std::string string(const std::string& name, const std::string& fallback) {
    if (!j_.contains(name)) return fallback;
    const json& v = j_.at(name);
    if (!v.is_string()) throw EntryError(name, "must be a string, got " + shown(v));
    return v.get<std::string>();
  }

  bool boolean(const std::string& name, bool fallback) {
    if (!j_.contains(name)) return fallback;
    const json& v = j_.at(name);
    if (!v.is_boolean()) throw EntryError(name, "must be true or false, got " + shown(v));
    return v.get<bool>();
  }

  int64_t integer(const std::string& name) { return as_integer(name, require(name)); }

  std::vector<int64_t> integers(const std::string& name) {
    const json& v = require(name);
    if (!v.is_array()) throw EntryError(name, "must be an array of integers, got " + shown(v));
    std::vector<int64_t> out;
    for (const json& e : v) out.push_back(as_integer(name, e));
    return out;
  }

 private:
  // An integer that fits int64_t. One past it (2^64-1, 1e20) is out of range rather than "not an
  // integer"; 2.5, 4.0 and "8" are not integers (4.0 is read as a float, which could hide 30.9).
  static int64_t as_integer(const std::string& name, const json& v) {
    const bool too_big = v.is_number_unsigned() ? v.get<uint64_t>() > INT64_MAX
                         : v.is_number_float()  ? std::fabs(v.get<double>()) >= 0x1p63
                                                : false;
    if (too_big)
      throw EntryError(name, shown(v) + " is out of range (an integer here is at most 2^63-1)");
    if (v.is_number_integer()) return v.get<int64_t>();
    throw EntryError(name, "must be an integer, got " + shown(v));
  }

  const json& j_;
  std::string op_;
};

DType dtype_field(Fields& f, const std::string& name, const std::string& fallback) {
  const std::string s = f.string(name, fallback);
  try {
    return parse_dtype(lower(s));
  } catch (const Error& e) {
    throw EntryError(name, e.what());
  }
}

// The specializations the op's own specs_for names for the pointer alignments asked for (aligned
// first, the op's preference within each), without duplicates.
template <class SpecsFor>
std::vector<Spec> distinct_specs(const OpContext& ctx, SpecsFor specs_for) {
  std::vector<Spec> out;
  std::set<std::string> seen;
  for (const bool aligned : {true, false}) {
    if (!(aligned ? ctx.aligned : ctx.unaligned)) continue;
    for (Spec& s : specs_for(aligned))
      if (seen.insert(s.instantiation()).second) out.push_back(std::move(s));
  }
  return out;
}

// ---- group_norm -------------------------------------------------------------------------------
// Fields: shape (required; [N, C, *spatial] for nchw, [N, *spatial, C] for nhwc), groups
// (required), dtype (f32), param_dtype (= dtype), layout (nchw), activation (silu), affine (true),
// weight / bias (= affine). Exactly what ops::group_norm compiles, from the op's own
// group_norm_specs_for (with --all-candidates, what autotuning compiles).
OpSpecs group_norm_op(const json& j, const OpContext& ctx) {
  using namespace kjit::ops;
  Fields f(j, "group_norm",
           {"dtype", "param_dtype", "layout", "shape", "groups", "activation", "affine", "weight",
            "bias"});
  const DType dtype = dtype_field(f, "dtype", "f32");
  const DType param_dtype = dtype_field(f, "param_dtype", dtype_name(dtype));
  Layout layout;
  try {
    layout = parse_layout(lower(f.string("layout", "nchw")));
  } catch (const Error& e) {
    throw EntryError("layout", e.what());
  }
  const std::vector<int64_t> shape = f.integers("shape");
  const int64_t groups = f.integer("groups");
  Activation act;
  try {
    act = parse_activation(f.string("activation", "silu"));
  } catch (const Error& e) {
    throw EntryError("activation", e.what());
  }
  const bool affine = f.boolean("affine", true);
  const bool weight = f.boolean("weight", affine);
  const bool bias = f.boolean("bias", affine);

  if (shape.size() < 2)
    throw EntryError("shape", "needs at least 2 dims (N, C), got " + std::to_string(shape.size()));
  GroupNormProblem p;
  try {
    p = GroupNormProblem::from_shape(shape, groups, dtype, layout);
  } catch (const Error& e) {
    throw EntryError("shape", e.what());
  }
  p.param_dtype = param_dtype;
  p.activation = act;
  p.has_weight = weight;
  p.has_bias = bias;
  if (groups <= 0) throw EntryError("groups", "must be > 0, got " + std::to_string(groups));
  if (p.C > 0 && p.C % groups != 0)
    throw EntryError("groups", "C = " + std::to_string(p.C) +
                                   " is not divisible by groups = " + std::to_string(groups));
  try {
    validate(p);
  } catch (const Error& e) {
    // The problem's field (Error::field) as the manifest names it: N, C and S come from "shape".
    throw EntryError(e.field() == "groups" ? "groups" : "shape", e.what());
  }

  OpSpecs out;
  out.describe = "group_norm " + p.describe();
  if (p.N == 0 || p.S == 0) return out;  // an empty tensor: the runtime launches nothing
  out.specs = distinct_specs(ctx, [&](bool aligned) {
    GroupNormOptions opt;
    opt.autotune = ctx.all_candidates;
    return group_norm_specs_for(p, ctx.target, opt, aligned);
  });
  return out;
}

// ---- linear_gn_min ----------------------------------------------------------------------------
// Fields: M, K, N, groups (required), dtype (f32; bf16 means x and weight are given as bf16, i.e.
// precision bf16-inputs), precision (fp32, or tf32 / bf16-inputs), bias_add (auto, epilogue,
// kernel: LinearGnMinOptions::bias_add; kernel compiles the kernels that add the Linear's bias,
// auto and epilogue those that do not, and autotuning under auto tries both). The cuBLASLt GEMM
// needs no NVRTC compile; only the fused GroupNorm/min/bias kernel does, exactly what
// ops::linear_gn_min compiles, from the op's own linear_gn_min_specs_for. `aligned` here is the
// output pointer's 16-byte alignment (the kernel's vector stores); x, weight and the biases only
// change the GEMM's algorithm.
OpSpecs linear_gn_min_op(const json& j, const OpContext& ctx) {
  using namespace kjit::ops;
  Fields f(j, "linear_gn_min", {"dtype", "precision", "M", "K", "N", "groups", "bias_add"});
  LinearBiasAdd bias_add;
  try {
    bias_add = parse_bias_add(lower(f.string("bias_add", "auto")));
  } catch (const Error& e) {
    throw EntryError("bias_add", e.what());
  }
  const DType dtype = dtype_field(f, "dtype", "f32");
  if (dtype != DType::F32 && dtype != DType::BF16)
    throw EntryError("dtype", std::string("'") + dtype_name(dtype) +
                                  "' is not f32 or bf16 (bf16: x and weight given as bf16)");
  const bool bf16 = dtype == DType::BF16;
  const std::string prec = lower(f.string("precision", bf16 ? "bf16-inputs" : "fp32"));
  LinearGnMinProblem p;
  try {
    p.precision = parse_precision(prec);
  } catch (const Error& e) {
    throw EntryError("precision", e.what());
  }
  if (bf16 != (p.precision == Precision::Bf16Inputs))
    throw EntryError("precision", "'" + prec + "' does not go with dtype " + dtype_name(dtype) +
                                      " (bf16 inputs are precision bf16-inputs)");
  p.M = f.integer("M");
  p.K = f.integer("K");
  p.N = f.integer("N");
  p.G = f.integer("groups");
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"M", p.M}, {"K", p.K}, {"N", p.N}, {"groups", p.G}})
    if (v < 1) throw EntryError(name, "must be >= 1, got " + std::to_string(v));
  if (p.N % p.G != 0)
    throw EntryError("groups", "N = " + std::to_string(p.N) +
                                   " is not divisible by groups = " + std::to_string(p.G));
  try {
    validate(p);
  } catch (const Error& e) {
    // The problem's field (Error::field) as the manifest names it: G is "groups".
    throw EntryError(e.field() == "G" ? "groups" : e.field(), e.what());
  }

  OpSpecs out;
  out.describe = "linear_gn_min " + p.describe();
  out.specs = distinct_specs(ctx, [&](bool out_aligned) {
    LinearGnMinOptions opt;
    opt.bias_add = bias_add;
    opt.autotune = ctx.all_candidates;
    return linear_gn_min_specs_for(p, ctx.target, opt, out_aligned);
  });
  return out;
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

// A problem holding a marked value fails alone, naming the field that holds it.
void throw_marked(const json& problem) {
  if (auto m = json_mark(problem)) throw EntryError("", *m);
  if (!problem.is_object()) return;
  for (auto it = problem.begin(); it != problem.end(); ++it)
    if (auto m = find_mark(it.value())) throw EntryError(it.key(), *m);
}

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
  if (source == "--problem") return source + "[" + std::to_string(index) + "]";
  return source + ": problems[" + std::to_string(index) + "]";
}

const std::map<std::string, OpFn>& op_registry() {
  static const std::map<std::string, OpFn> ops = {
      {"group_norm", group_norm_op},
      {"linear_gn_min", linear_gn_min_op},
  };
  return ops;
}

OpSpecs problem_specs(const json& problem, const OpContext& ctx) {
  throw_marked(problem);
  if (!problem.is_object()) throw EntryError("", "must be a JSON object, got " + shown(problem));
  if (!problem.contains("op")) throw EntryError("op", "missing (the op's name, e.g. group_norm)");
  const json& op = problem.at("op");
  if (!op.is_string()) throw EntryError("op", "must be a string, got " + shown(op));
  const auto& ops = op_registry();
  auto it = ops.find(op.get<std::string>());
  if (it == ops.end()) {
    std::string known;
    for (const auto& [name, fn] : ops) known += (known.empty() ? "" : ", ") + name;
    throw EntryError("op", "unknown op '" + op.get<std::string>() + "' (known: " + known + ")");
  }
  return it->second(problem, ctx);
}

Manifest parse_manifest(const std::string& text, const std::string& source) {
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
    m.problems.push_back(ProblemEntry{source, i, problems->at(i)});
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
  if (sms < 1)
    throw kjit::Error(kjit::Errc::InvalidArgument,
                      "target '" + arch + "': the SM count after ':' must be an integer >= 1");
  return kjit::Target::for_arch(arch.substr(0, colon), sms);
}

}  // namespace kjit::tools
