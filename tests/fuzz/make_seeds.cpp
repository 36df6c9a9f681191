// kjit_fuzz_seeds <dir>: writes the fuzzers' generated seeds (.ci/run runs it, so that no binary
// seed is committed): <dir>/entry/ (entries as serialize_entry writes them), <dir>/archive/
// (archives DiskCache::export_to wrote from caches of 0, 1, 3 and 9 entries, each in both
// fuzz_archive modes), <dir>/remote_value/ (signed values in fuzz_remote_value's value modes, and
// URLs in its URL mode), <dir>/manifest/ (the embedded default manifest), <dir>/includes/ (kjit's
// built-in templates) and <dir>/config/ (the built-in ops' candidate configs as describe() writes
// them, behind fuzz_config's op byte). The other manifest and
// --problem seeds are the files in tests/fuzz/corpus/manifest/: copied from tests/tools/ and
// docs/TOOLS.md, and found_<commit>_* are inputs that failed fuzz_manifest at that commit, kept so
// that every run tries them again (their regression tests are in tests/tools/manifest_test.cpp).
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "entry_format.hpp"
#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/templates.hpp"
#include "manifest.hpp"
#include "remote_value.hpp"

namespace fs = std::filesystem;
using namespace kjit::cache;

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Key key_of(const std::string& s) {
  return KeyBuilder().add("fuzz seed", s).finish();
}

// Small entries shaped like the runtime's (a kernel's metadata, a binary payload; tuning records)
// and corners. Against fuzz_archive's 1 KiB cap the kernel (~600 bytes) is over half of it, and
// all of them together are over it, so that seeds reach the oversized skip and the trim.
std::vector<std::pair<Key, Entry>> sample_entries() {
  std::vector<std::pair<Key, Entry>> out;
  Entry kernel;
  kernel.label = "kjit::group_norm<float, 8, 576> [sm_90]";
  kernel.metadata = {{"kind", "kernel"},
                     {"lowered_name", "_Z10group_normIfLi8ELi576EEvPKfPf"},
                     {"arch", "sm_90"},
                     {"format", "cubin"}};
  kernel.payload = std::string("\177ELF\2\1\1\0\0\0", 10) + std::string(300, 'Z');
  out.emplace_back(key_of("kernel"), kernel);
  out.emplace_back(key_of("empty"), Entry{});
  Entry odd;
  odd.label = std::string("\0\xff label", 8);
  odd.metadata = {{"", ""}, {"log", std::string(40, '\n')}};
  odd.payload = std::string(1, '\0');
  out.emplace_back(key_of("odd"), odd);
  for (int i = 0; i < 6; ++i) {
    Entry tune;
    tune.label = "group_norm 8x256x24x24 g=32 f32 #" + std::to_string(i);
    tune.metadata = {{"kind", "tune"}, {"arch", "sm_90"}};
    tune.payload = "{\"config\": " + std::to_string(i) + "}";
    out.emplace_back(key_of("tune" + std::to_string(i)), tune);
  }
  return out;
}

}  // namespace

namespace {

// fuzz_config: every family's and kind's configs, as the ops' candidates for a few problems on
// sm_90 describe them, each behind its op byte (0 GroupNorm, 1 LayerNorm, 2 Linear-GN-min, 3
// Linear-GN-min's config with a GEMM algorithm, as LinearGnMinInfo::pin() writes it).
void write_config_seeds(const fs::path& dir) {
  using namespace kjit::ops;
  const kjit::Target t = kjit::Target::for_cc(90);
  std::vector<std::string> seeds;
  for (const auto& shape : {std::vector<int64_t>{8, 256, 24, 24}, {1, 32, 1 << 20}, {2, 4, 7}})
    for (const GroupNormConfig& c : group_norm_candidates(
             GroupNormProblem::from_shape(shape, shape[1] / 4, kjit::DType::F32), t, true))
      seeds.push_back('\0' + c.describe());
  for (int64_t width : {int64_t{128}, int64_t{4096}, int64_t{65536}, int64_t{1} << 20})
    for (const LayerNormConfig& c :
         layer_norm_candidates(LayerNormProblem::layer_norm(1, width, kjit::DType::F32), t, true))
      seeds.push_back('\1' + c.describe());
  LinearGnMinProblem p;
  p.M = 1024, p.K = 8192, p.N = 8192, p.G = 512;
  const GemmAlgo algo{21, 20, 8, 1, 0, 0, 0};
  for (const GnMinConfig& c : gn_min_candidates(p, t, true)) {
    seeds.push_back('\2' + c.describe());
    seeds.push_back('\3' + c.describe() + "; GEMM " + algo.describe());
  }
  for (size_t i = 0; i < seeds.size(); ++i)
    write_file(dir / ("seed" + std::to_string(i)), seeds[i]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kjit_fuzz_seeds <dir>\n");
    return 2;
  }
  try {
    const fs::path root = argv[1];
    for (const char* sub : {"entry", "archive", "remote_value", "manifest", "includes", "config"})
      fs::create_directories(root / sub);
    const auto entries = sample_entries();
    for (size_t i = 0; i < entries.size(); ++i)
      write_file(root / "entry" / ("seed" + std::to_string(i)),
                 detail::serialize_entry(entries[i].first, entries[i].second));
    // fuzz_remote_value's first byte: 0 = a value as is, 1 = re-signed, 2 = a URL. Mode 1 seeds
    // are sealed with the fuzzer's fleet key; mode 0 ones with another key (a value someone else
    // signed), since mode 0 asserts that nothing it reads opens.
    const std::string fleet(32, 'f'), other(32, 'o');
    for (size_t i = 0; i < entries.size(); ++i)
      for (char mode : {'\0', '\1'})
        write_file(
            root / "remote_value" / ("seed" + std::to_string(i) + "-mode" + std::to_string(mode)),
            mode + detail::seal_value(mode == '\1' ? fleet : other, entries[i].first,
                                      entries[i].second));
    const char* const urls[] = {"redis://127.0.0.1:6379/0", "redis://:pa%40ss@cache:7000/3",
                                "redis://user:secret@[::1]:6380", "rediss://h"};
    for (size_t i = 0; i < std::size(urls); ++i)
      write_file(root / "remote_value" / ("url" + std::to_string(i)), '\2' + std::string(urls[i]));

    std::string tmpl = (fs::temp_directory_path() / "kjit-fuzz-seeds-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    const fs::path scratch = tmpl;
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, entries.size()}) {
      const fs::path dir = scratch / ("cache" + std::to_string(n));
      Options o;
      o.dir = dir.string();
      o.mode = Mode::ReadWrite;
      o.max_bytes = 0;
      DiskCache cache(o);
      for (size_t i = 0; i < n; ++i)
        if (!cache.put(entries[i].first, entries[i].second))
          throw std::runtime_error("cannot fill a seed cache in " + dir.string());
      const fs::path archive = scratch / ("archive" + std::to_string(n));
      cache.export_to(archive.string());
      const std::string bytes = read_file(archive);
      // fuzz_archive's first byte: 0 = as is, 1 = checksums recomputed.
      for (char mode : {'\0', '\1'})
        write_file(root / "archive" / ("seed" + std::to_string(n) + "-mode" + std::to_string(mode)),
                   mode + bytes);
    }
    fs::remove_all(scratch);
    write_file(root / "manifest" / "default.json", kjit::tools::default_manifest_text());
    // fuzz_includes: kjit's own templates, as embedded.
    size_t k = 0;
    for (const auto& [name, text] : kjit::TemplateSet::builtins())
      write_file(root / "includes" / ("builtin" + std::to_string(k++)), text);
    write_config_seeds(root / "config");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
