// Runs the tool binaries (KJIT_TOOLS_DIR) through the shell and captures stdout, stderr and the
// exit status; small file helpers for manifests and cache entries.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#ifndef KJIT_TOOLS_DIR
#error "KJIT_TOOLS_DIR must point at the folder holding kjit-precompile and kjit-cache"
#endif

namespace kjit_test {

struct ToolResult {
  int rc = -1;
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }  // throws if not JSON
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// `tool` is "kjit-precompile", "kjit-cache" or "kjit-bench"; `args` is appended as is (shell
// syntax). Paths used in tests come from mkdtemp and need no quoting.
// `env` ("NAME=value ... ", shell syntax) is set for the tool alone.
inline ToolResult run_tool(const std::string& tool, const std::string& args,
                           const std::string& scratch_dir, const std::string& env = {}) {
  const std::string err_path = scratch_dir + "/stderr.txt";
  const std::string cmd = env + std::string(KJIT_TOOLS_DIR) + "/" + tool + " " + args + " 2>" +
                          err_path + " </dev/null";
  ToolResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_text(err_path);
  return r;
}

}  // namespace kjit_test
