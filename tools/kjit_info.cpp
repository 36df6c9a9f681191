// kjit-info: what kjit sees on this machine (NVRTC, archs, driver, device, cache) and one
// built-in template compiled for sm_90 (or the device) to show the JIT path works.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kjit/kjit.hpp"
#include "tool_util.hpp"

namespace {

nlohmann::json device_json() {
  nlohmann::json out;
  std::string why;
  if (!kjit::gpu_available(&why)) {
    out["device"] = nullptr;
    out["no_gpu_reason"] = why;
    return out;
  }
  kjit::Runtime rt;
  const auto& p = rt.props();
  out["driver_version"] = p.driver_version;
  out["device"] = {{"ordinal", p.ordinal},
                   {"name", p.name},
                   {"cc", p.cc()},
                   {"sm_count", p.sm_count},
                   {"l2_bytes", p.l2_bytes},
                   {"smem_optin", p.max_smem_per_block_optin},
                   {"clusters", p.cluster_launch},
                   {"arch", rt.arch()}};
  return out;
}

nlohmann::json cache_json(kjit::cache::DiskCache& cache) {
  nlohmann::json c = {{"dir", cache.dir()},
                      {"mode", cache.mode() == kjit::cache::Mode::ReadWrite  ? "rw"
                               : cache.mode() == kjit::cache::Mode::ReadOnly ? "ro"
                                                                             : "off"}};
  // Why the cache is off or read-only (a folder the trust policy refused, or not writable).
  if (!cache.refused_reason().empty()) c["refused"] = cache.refused_reason();
  if (!cache.read_only_reason().empty()) c["read_only_reason"] = cache.read_only_reason();
  // The remote tier as configured (its URL without the password), or null.
  c["remote"] = cache.remote() ? nlohmann::json(cache.remote()->where()) : nlohmann::json(nullptr);
  return c;
}

nlohmann::json sample_compile_json(kjit::Compiler& compiler, const std::string& arch) {
  kjit::Spec spec("kjit/test_kernels.cuh", "kjit::test_affine");
  spec.type(kjit::DType::F32).value(2).value(3).value(true);
  auto t0 = std::chrono::steady_clock::now();
  kjit::CompiledKernel k = compiler.get(spec, arch);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return {{"instantiation", k.instantiation}, {"lowered_name", k.lowered_name}, {"arch", k.arch},
          {"bytes", k.binary.size()},         {"from_disk_cache", k.from_disk}, {"ms", ms}};
}

nlohmann::json collect(const std::string& arch) {
  nlohmann::json out;
  out["kjit_version"] = KJIT_VERSION_STRING;
  out["nvrtc_version"] = kjit::Compiler::nvrtc_version();
  std::vector<std::string> archs;
  for (int s : kjit::Compiler::supported_sm()) archs.push_back("sm_" + std::to_string(s));
  out["nvrtc_archs"] = archs;
  out.update(device_json());
  kjit::Compiler compiler;
  out["cache"] = cache_json(compiler.disk_cache());
  out["sample_compile"] = sample_compile_json(compiler, arch);
  return out;
}

std::string text(const nlohmann::json& j) {
  return kjit::tools::printable(j.get<std::string>());
}

void print_text(const nlohmann::json& out) {
  std::printf("kjit %s\nNVRTC %s, archs:", out["kjit_version"].get<std::string>().c_str(),
              out["nvrtc_version"].get<std::string>().c_str());
  for (auto& a : out["nvrtc_archs"]) std::printf(" %s", a.get<std::string>().c_str());
  std::printf("\n");
  if (out["device"].is_null()) {
    std::printf("GPU: none (%s)\n", out["no_gpu_reason"].get<std::string>().c_str());
  } else {
    auto& d = out["device"];
    std::printf("GPU %d: %s, cc %d, %d SMs, L2 %d KB, driver %d, target %s\n",
                d["ordinal"].get<int>(), d["name"].get<std::string>().c_str(), d["cc"].get<int>(),
                d["sm_count"].get<int>(), d["l2_bytes"].get<int>() / 1024,
                out["driver_version"].get<int>(), d["arch"].get<std::string>().c_str());
  }
  const auto& c = out["cache"];
  std::printf("cache: %s (%s)\n", text(c["dir"]).c_str(), c["mode"].get<std::string>().c_str());
  for (const char* why : {"refused", "read_only_reason"})
    if (c.contains(why)) std::printf("  %s\n", text(c[why]).c_str());
  if (!c["remote"].is_null()) std::printf("remote cache: %s\n", text(c["remote"]).c_str());
  auto& s = out["sample_compile"];
  std::printf("sample: %s for %s -> %zu bytes, %s in %.1f ms\n",
              s["instantiation"].get<std::string>().c_str(), s["arch"].get<std::string>().c_str(),
              s["bytes"].get<size_t>(), s["from_disk_cache"].get<bool>() ? "disk hit" : "compiled",
              s["ms"].get<double>());
}

int run(int argc, char** argv) {
  CLI::App app{"kjit-info: NVRTC, driver, device and cache as kjit sees them"};
  std::string arch = "sm_90";
  bool json = false;
  app.add_option("--arch", arch, "target for the sample compile (default sm_90)");
  app.add_flag("--json", json, "print one JSON object");
  if (const auto rc = kjit::tools::parse_args(app, argc, argv)) return *rc;
  nlohmann::json out;
  try {
    out = collect(arch);
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-info: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  }
  if (json)
    std::printf("%s\n", kjit::tools::json_text(out).c_str());
  else
    print_text(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return kjit::tools::finish_output("kjit-info", run(argc, argv));
}
