#include "manifest.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
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
    if (!v.is_string()) throw EntryError(name, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  bool boolean(const std::string& name, bool fallback) {
    if (!j_.contains(name)) return fallback;
    const json& v = j_.at(name);
    if (!v.is_boolean()) throw EntryError(name, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }

  int64_t integer(const std::string& name) { return as_integer(name, require(name)); }

  std::vector<int64_t> integers(const std::string& name) {
    const json& v = require(name);
    if (!v.is_array()) throw EntryError(name, "must be an array of integers, got " + v.dump());
    std::vector<int64_t> out;
    for (const json& e : v) out.push_back(as_integer(name, e));
    return out;
  }

 private:
  static int64_t as_integer(const std::string& name, const json& v) {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
      return v.get<int64_t>();
    throw EntryError(name, "must be an integer, got " + v.dump());
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

// The specializations of an op's configs for the pointer alignments asked for (aligned first, the
// heuristic's pick first within each), without duplicates. configs(aligned) gives the heuristic's
// config, or every autotune candidate; to_spec turns one into the Spec the runtime compiles.
template <class Configs, class ToSpecs>
std::vector<Spec> distinct_specs(const OpContext& ctx, Configs configs, ToSpecs to_specs) {
  std::vector<Spec> out;
  std::set<std::string> seen;
  for (const bool aligned : {true, false}) {
    if (!(aligned ? ctx.aligned : ctx.unaligned)) continue;
    for (const auto& c : configs(aligned))
      for (Spec& s : to_specs(c))
        if (seen.insert(s.instantiation()).second) out.push_back(std::move(s));
  }
  return out;
}

// ---- group_norm -------------------------------------------------------------------------------
// Fields: shape (required; [N, C, *spatial] for nchw, [N, *spatial, C] for nhwc), groups
// (required), dtype (f32), param_dtype (= dtype), layout (nchw), activation (silu), affine (true),
// weight / bias (= affine). Exactly what ops::group_norm compiles: group_norm_specs of the
// heuristic's config, and of its capture fallback when it is split (or of every autotune
// candidate), for the target's compute capability.
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
  const std::string act = lower(f.string("activation", "silu"));
  if (act != "silu" && act != "none")
    throw EntryError("activation", "'" + act + "' is not silu or none");
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
  p.activation = act == "silu" ? Activation::SiLU : Activation::None;
  p.has_weight = weight;
  p.has_bias = bias;
  if (groups <= 0) throw EntryError("groups", "must be > 0, got " + std::to_string(groups));
  if (p.C > 0 && p.C % groups != 0)
    throw EntryError("groups", "C = " + std::to_string(p.C) +
                                   " is not divisible by groups = " + std::to_string(groups));
  try {
    validate(p);
  } catch (const Error& e) {
    const std::string m = e.what();
    throw EntryError(m.find("groups =") != std::string::npos ? "groups" : "shape", m);
  }

  OpSpecs out;
  out.describe = "group_norm " + p.describe();
  if (p.N == 0 || p.S == 0) return out;  // an empty tensor: the runtime launches nothing
  out.specs = distinct_specs(
      ctx,
      [&](bool aligned) {
        if (ctx.all_candidates) return group_norm_candidates(p, ctx.cc, aligned);
        std::vector<GroupNormConfig> configs{group_norm_heuristic(p, ctx.cc, aligned)};
        if (configs[0].needs_workspace())
          configs.push_back(group_norm_capture_fallback(p, ctx.cc, aligned));
        return configs;
      },
      [&](const GroupNormConfig& c) { return group_norm_specs(p, c); });
  return out;
}

// ---- linear_gn_min ----------------------------------------------------------------------------
// Fields: M, K, N, groups (required), dtype (f32; bf16 means x and weight are given as bf16, i.e.
// precision bf16-inputs), precision (fp32, or tf32 / bf16-inputs), bias_add (auto, epilogue,
// kernel: LinearGnMinOptions::bias_add; kernel compiles the kernels that add the Linear's bias,
// auto and epilogue those that do not, and autotuning under auto tries both). The cuBLASLt GEMM
// needs no NVRTC compile; only the fused GroupNorm/min/bias kernel does, exactly what
// ops::linear_gn_min compiles: gn_min_specs of the heuristic's config (or of every autotune
// candidate, with and without linear_bias) for the target's compute capability and SM count
// (ctx.sm_count). `aligned` here is the output pointer's 16-byte alignment (the kernel's vector
// stores); x, weight and the biases only change the GEMM's algorithm.
OpSpecs linear_gn_min_op(const json& j, const OpContext& ctx) {
  using namespace kjit::ops;
  Fields f(j, "linear_gn_min", {"dtype", "precision", "M", "K", "N", "groups", "bias_add"});
  LinearBiasAdd bias_add;
  try {
    bias_add = parse_bias_add(lower(f.string("bias_add", "auto")));
  } catch (const Error& e) {
    throw EntryError("bias_add", e.what());
  }
  // The kernel variants a call compiles (with --all-candidates, those autotuning times).
  const std::vector<bool> adds_bias = linear_gn_min_kernel_adds_bias(bias_add, ctx.all_candidates);
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
    // The rule's first operand names the field: "linear_gn_min: K = ... exceeds ...".
    const std::string m = e.what();
    const std::string prefix = "linear_gn_min: ";
    const char first = m.rfind(prefix, 0) == 0 && m.size() > prefix.size() ? m[prefix.size()] : 'N';
    throw EntryError(first == 'M' ? "M" : first == 'K' ? "K" : first == 'G' ? "groups" : "N", m);
  }

  OpSpecs out;
  out.describe = "linear_gn_min " + p.describe();
  out.specs = distinct_specs(
      ctx,
      [&](bool out_aligned) {
        const std::vector<GnMinConfig> base =
            ctx.all_candidates
                ? gn_min_candidates(p, ctx.cc, ctx.sm_count, out_aligned)
                : std::vector<GnMinConfig>{gn_min_heuristic(p, ctx.cc, ctx.sm_count, out_aligned)};
        std::vector<GnMinConfig> all;
        for (bool lb : adds_bias)
          for (GnMinConfig c : base) {
            c.linear_bias = lb;
            all.push_back(c);
          }
        return all;
      },
      [&](const GnMinConfig& c) { return gn_min_specs(p, c); });
  return out;
}

// The two seed workloads (DESIGN.md). JSON has no comments, hence the C++ ones.
const char* const kDefaultManifest = R"({
  "problems": [
    {"op": "group_norm", "dtype": "f32", "layout": "nchw", "shape": [8, 256, 24, 24],
     "groups": 32, "activation": "silu", "affine": true},
    {"op": "linear_gn_min", "dtype": "f32", "M": 1024, "K": 8192, "N": 8192, "groups": 512}
  ]
})";

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
  if (!problem.is_object()) throw EntryError("", "must be a JSON object, got " + problem.dump());
  if (!problem.contains("op")) throw EntryError("op", "missing (the op's name, e.g. group_norm)");
  const json& op = problem.at("op");
  if (!op.is_string()) throw EntryError("op", "must be a string, got " + op.dump());
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
    j = parse_json(text);
  } catch (const JsonError& e) {
    throw ManifestError(source + ": " + e.what());
  }
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
      return parse_json(text);
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
  auto set = [&](const std::string& key, json value, const std::string& token) {
    if (j.contains(key))
      throw EntryError(key, "given twice (token '" + token + "', had " + j[key].dump() + ")");
    j[key] = std::move(value);
  };
  auto is_int = [](const std::string& s) {
    size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
    return i < s.size() && s.size() - i <= 18 &&
           std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  auto dims = [&](const std::string& s, json* out) {  // "8x256x24x24"
    std::vector<int64_t> v;
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t x = s.find_first_of("xX", pos);
      std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      if (!is_int(part) || part[0] == '-') return false;
      v.push_back(std::stoll(part));
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    *out = v;
    return v.size() >= 2;
  };
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const std::string lt = lower(t);
    json shape;
    if (size_t eq = t.find('='); eq != std::string::npos) {
      std::string key = t.substr(0, eq), val = t.substr(eq + 1);
      if (key.empty()) throw EntryError("", "token '" + t + "' has no key before '='");
      if (key == "g" || key == "G") key = "groups";
      json v;
      if (is_int(val))
        v = std::stoll(val);
      else if (lower(val) == "true" || lower(val) == "false")
        v = lower(val) == "true";
      else if (json d; dims(val, &d))
        v = d;
      else
        v = val;
      set(key, v, t);
    } else if (dims(t, &shape)) {
      set("shape", shape, t);
    } else if (lt == "nchw" || lt == "nhwc") {
      set("layout", lt, t);
    } else if (lt == "silu" || lt == "none") {
      set("activation", lt, t);
    } else if (lt == "affine" || lt == "noaffine" || lt == "no-affine") {
      set("affine", lt == "affine", t);
    } else {
      try {
        set("dtype", dtype_name(parse_dtype(lt)), t);
      } catch (const Error&) {
        throw EntryError("", "token '" + t +
                                 "' is not a dtype (f32, f16, bf16), a layout (nchw, nhwc), a "
                                 "shape (8x256x24x24), an activation (silu, none), affine, "
                                 "noaffine, or key=value");
      }
    }
  }
  return j;
}

Target parse_target(const std::string& arch) {
  return Target{arch, Compiler::arch_sm(arch), 0};
}

}  // namespace kjit::tools
