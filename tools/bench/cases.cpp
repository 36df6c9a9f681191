#include "cases.hpp"

#include <fstream>

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

std::vector<Case> load_cases(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw kjit::Error(kjit::Errc::Io, "cannot read shapes file '" + path + "'");
  nlohmann::json j = nlohmann::json::parse(f);
  std::vector<Case> out;
  for (const auto& e : j) {
    Case c;
    c.op = e.at("op").get<std::string>();
    c.shape = e.at("shape").get<std::vector<int64_t>>();
    c.groups = e.at("groups").get<int64_t>();
    c.dtype = e.value("dtype", "f32");
    c.layout = e.value("layout", "nchw");
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
