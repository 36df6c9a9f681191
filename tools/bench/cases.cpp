#include "cases.hpp"

#include <cstdint>

#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "tool_util.hpp"

namespace kjit_bench {

std::vector<Case> default_cases() {
  // The shape list: (N, C, H, W, G), fp32 and bf16.
  const std::vector<std::vector<int64_t>> gn = {
      {8, 256, 24, 24, 32},  {2, 320, 64, 64, 32},   {2, 640, 32, 32, 32}, {2, 1280, 16, 16, 32},
      {16, 512, 64, 64, 32}, {1, 128, 256, 256, 32}, {32, 64, 32, 32, 64}, {4, 32, 7, 7, 8},
      {1, 4096, 8, 8, 32},   {128, 256, 14, 14, 32}};
  std::vector<Case> out;
  for (const char* dt : {"f32", "bf16"})
    for (const auto& s : gn) {
      Case c;
      c.op = "group_norm";
      c.shape = {s[0], s[1], s[2], s[3]};
      c.groups = s[4];
      c.dtype = dt;
      out.push_back(c);
    }
  // Linear-GN-min-bias (M, K, N, G), strict FP32; the seed also in the TF32 opt-in.
  const std::vector<std::vector<int64_t>> lgm = {{1024, 8192, 8192, 512},
                                                 {128, 4096, 4096, 256},
                                                 {4096, 4096, 4096, 64},
                                                 {16, 8192, 8192, 512}};
  for (const auto& s : lgm) {
    Case c;
    c.op = "linear_gn_min";
    c.shape = {s[0], s[1], s[2]};
    c.groups = s[3];
    c.dtype = "fp32";
    out.push_back(c);
  }
  // The seed in the opt-in precisions: TF32, and split precision (fp32x3) with the weight
  // prepacked once and split on every call.
  for (const char* dt : {"tf32", "fp32x3", "fp32x3-percall"}) {
    Case o = out.back();
    o.shape = {1024, 8192, 8192};
    o.groups = 512;
    o.dtype = dt;
    out.push_back(o);
  }
  // LayerNorm and RMSNorm on transformer shapes (rows x width), fp32 and bf16.
  const std::vector<std::vector<int64_t>> rn = {{4096, 768},  {8192, 1024}, {16384, 4096},
                                                {2048, 8192}, {32768, 128}, {1, 65536}};
  for (const char* op : {"layer_norm", "rms_norm"})
    for (const char* dt : {"f32", "bf16"})
      for (const auto& s : rn) {
        Case c;
        c.op = op;
        c.shape = s;
        c.dtype = dt;
        out.push_back(c);
      }
  return out;
}

kjit::ops::GroupNormProblem group_norm_problem(const Case& c) {
  return kjit::ops::GroupNormProblem::from_shape(c.shape, c.groups, kjit::parse_dtype(c.dtype),
                                                 kjit::ops::parse_layout(c.layout));
}

kjit::ops::LinearGnMinProblem linear_gn_min_problem(const Case& c) {
  auto bad = [](const std::string& what) { throw kjit::Error(kjit::Errc::InvalidArgument, what); };
  if (c.shape.size() != 3)
    bad("linear_gn_min needs shape [M, K, N], got " + std::to_string(c.shape.size()) + " dims");
  kjit::ops::LinearGnMinProblem p;
  p.M = c.shape[0];
  p.K = c.shape[1];
  p.N = c.shape[2];
  p.G = c.groups;
  // The benchmark's data are fp32: bf16-inputs is not one it times. fp32x3 runs with a
  // prepacked weight, fp32x3-percall splits the weight in every call.
  if (c.dtype != "fp32" && c.dtype != "tf32" && c.dtype != "fp32x3" && c.dtype != "fp32x3-percall")
    bad("dtype '" + c.dtype + "' must be fp32, tf32, fp32x3 or fp32x3-percall for linear_gn_min");
  p.precision = kjit::ops::parse_precision(c.dtype == "fp32x3-percall" ? "fp32x3" : c.dtype);
  return p;
}

bool row_norm_op(const std::string& op) {
  return op == "layer_norm" || op == "rms_norm";
}

namespace {

// The problem a case describes must be one kjit accepts: checked when the file is read, before
// the benchmark spends minutes on the cases before it.
void check_case(const Case& c) {
  if (c.op == "group_norm") {
    kjit::ops::validate(group_norm_problem(c));
  } else if (c.op == "linear_gn_min") {
    kjit::ops::validate(linear_gn_min_problem(c));
  } else if (row_norm_op(c.op)) {
    kjit::ops::validate(layer_norm_problem(c));
  } else {
    throw kjit::Error(
        kjit::Errc::InvalidArgument,
        "op '" + c.op + "' must be group_norm or linear_gn_min or layer_norm or rms_norm");
  }
}

}  // namespace

std::vector<Case> load_cases(const std::string& path) {
  const std::string file = "shapes file '" + path + "'";
  auto bad = [](const std::string& where, const std::string& what) {
    throw kjit::Error(kjit::Errc::InvalidArgument, where + ": " + what);
  };
  nlohmann::json j;
  try {
    j = kjit::tools::parse_json(kjit::tools::read_text_file(path));
  } catch (const kjit::tools::JsonError& e) {
    bad(file, e.what());
  }
  if (!j.is_array()) bad(file, "must be a JSON array of cases");
  std::vector<Case> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = file + ", case " + std::to_string(i);
    const auto& e = j[i];
    if (!e.is_object()) bad(where, "must be an object {op, shape, groups, dtype, layout}");
    Case c;
    try {
      // Numbers are integers (30.9 or 1e300 would convert silently), and every key is one the
      // case uses (a typo such as "dtpye" would run the default). Thrown without `where`: the
      // handler below adds it.
      auto invalid = [](const std::string& what) {
        throw kjit::Error(kjit::Errc::InvalidArgument, what);
      };
      auto integer = [&](const nlohmann::json& v, const std::string& what) {
        if (!v.is_number_integer()) invalid(what + " = " + v.dump() + " must be an integer");
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
          invalid(what + " = " + v.dump() + " exceeds 2^63 - 1");
        return v.get<int64_t>();
      };
      c.op = e.at("op").get<std::string>();
      for (const auto& [key, value] : e.items()) {
        (void)value;
        const bool known = key == "op" || key == "shape" || key == "dtype" ||
                           (key == "groups" && !row_norm_op(c.op)) ||
                           (key == "layout" && c.op == "group_norm");
        if (!known) invalid("unknown key '" + key + "' for op '" + c.op + "'");
      }
      const nlohmann::json& shape = e.at("shape");
      if (!shape.is_array()) invalid("shape must be an array of integers");
      for (const nlohmann::json& d : shape) c.shape.push_back(integer(d, "a shape dimension"));
      if (!row_norm_op(c.op)) c.groups = integer(e.at("groups"), "groups");
      c.dtype = e.value("dtype", c.op == "linear_gn_min" ? "fp32" : "f32");
      c.layout = e.value("layout", "nchw");
      check_case(c);
    } catch (const nlohmann::json::exception& ex) {
      bad(where, ex.what());
    } catch (const kjit::Error& ex) {
      if (ex.code() != kjit::Errc::InvalidArgument) throw;
      bad(where, ex.what());
    }
    out.push_back(c);
  }
  return out;
}

std::string shape_text(const Case& c) {
  std::string s;
  for (size_t i = 0; i < c.shape.size(); ++i) s += (i ? "x" : "") + std::to_string(c.shape[i]);
  return row_norm_op(c.op) ? s : s + "/G" + std::to_string(c.groups);
}

}  // namespace kjit_bench
