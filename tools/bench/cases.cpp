#include "cases.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

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
  Case tf32 = out.back();
  tf32.shape = {1024, 8192, 8192};
  tf32.groups = 512;
  tf32.dtype = "tf32";
  out.push_back(tf32);
  return out;
}

namespace {

[[noreturn]] void bad_case(const std::string& where, const std::string& what) {
  throw kjit::Error(kjit::Errc::InvalidArgument, where + ": " + what);
}

// The problem a case describes must be one kjit accepts: checked when the file is read, before
// the benchmark spends minutes on the cases before it.
void check_case(const Case& c, const std::string& where) {
  if (c.op == "group_norm") {
    if (c.layout != "nchw" && c.layout != "nhwc")
      bad_case(where, "layout '" + c.layout + "' must be nchw or nhwc");
    const auto layout = c.layout == "nhwc" ? kjit::ops::Layout::NHWC : kjit::ops::Layout::NCHW;
    kjit::ops::validate(kjit::ops::GroupNormProblem::from_shape(
        c.shape, c.groups, kjit::parse_dtype(c.dtype), layout));
  } else if (c.op == "linear_gn_min") {
    if (c.dtype != "fp32" && c.dtype != "tf32")
      bad_case(where, "dtype '" + c.dtype + "' must be fp32 or tf32 for linear_gn_min");
    if (c.shape.size() != 3)
      bad_case(where, "linear_gn_min needs shape [M, K, N], got " + std::to_string(c.shape.size()) +
                          " dims");
    kjit::ops::LinearGnMinProblem p;
    p.M = c.shape[0];
    p.K = c.shape[1];
    p.N = c.shape[2];
    p.G = c.groups;
    kjit::ops::validate(p);
  } else {
    bad_case(where, "op '" + c.op + "' must be group_norm or linear_gn_min");
  }
}

}  // namespace

std::vector<Case> load_cases(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw kjit::Error(kjit::Errc::Io, "shapes file '" + path + "' is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw kjit::Error(kjit::Errc::Io, "cannot read shapes file '" + path + "'");
  const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  nlohmann::json j;
  try {
    j = kjit::tools::parse_json_bounded(text);
  } catch (const nlohmann::json::exception& e) {
    bad_case("shapes file '" + path + "'", std::string("not valid JSON: ") + e.what());
  } catch (const kjit::tools::JsonTooDeep&) {
    bad_case("shapes file '" + path + "'", kjit::tools::json_too_deep_text());
  }
  if (!j.is_array()) bad_case("shapes file '" + path + "'", "must be a JSON array of cases");
  std::vector<Case> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = "shapes file '" + path + "', case " + std::to_string(i);
    const auto& e = j[i];
    Case c;
    try {
      if (!e.is_object()) bad_case(where, "must be an object {op, shape, groups, dtype, layout}");
      c.op = e.at("op").get<std::string>();
      c.shape = e.at("shape").get<std::vector<int64_t>>();
      c.groups = e.at("groups").get<int64_t>();
      c.dtype = e.value("dtype", c.op == "linear_gn_min" ? "fp32" : "f32");
      c.layout = e.value("layout", "nchw");
    } catch (const nlohmann::json::exception& ex) {
      bad_case(where, ex.what());
    }
    try {
      check_case(c, where);
    } catch (const kjit::Error& ex) {
      if (ex.code() != kjit::Errc::InvalidArgument) throw;
      const std::string msg = ex.what();
      if (msg.rfind(where, 0) == 0) throw;
      bad_case(where, msg);
    }
    out.push_back(c);
  }
  return out;
}

std::string shape_text(const Case& c) {
  std::string s;
  for (size_t i = 0; i < c.shape.size(); ++i) s += (i ? "x" : "") + std::to_string(c.shape[i]);
  return s + "/G" + std::to_string(c.groups);
}

}  // namespace kjit_bench
