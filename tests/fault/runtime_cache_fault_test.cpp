// Cache faults seen through the runtime: real NVRTC compiles of a built-in template (no GPU
// needed), and with a GPU the GroupNorm op's result after each fault.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "../cache/test_util.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"

namespace {

using kjit_test::TempDir;

kjit::Spec spec() {
  auto p = kjit::ops::GroupNormProblem::from_shape({2, 16, 5, 5}, 4, kjit::DType::F32);
  return kjit::ops::group_norm_specs(p, kjit::ops::group_norm_heuristic(p, 90)).at(0);  // one
}

kjit::cache::Options in(const std::string& dir,
                        kjit::cache::Mode m = kjit::cache::Mode::ReadWrite) {
  kjit::cache::Options o;
  o.dir = dir;
  o.mode = m;
  return o;
}

// The binary a clean compile gives (NVRTC is deterministic for the same input).
const std::string& clean_binary() {
  static const std::string b = [] {
    TempDir d;
    return kjit::Compiler(in(d.path(), kjit::cache::Mode::Off)).compile(spec(), "sm_90").binary;
  }();
  return b;
}

// Damages the one entry in `dir`, then checks that a fresh compiler recompiles, gets the right
// binary, counts the entry corrupt, and leaves a valid entry behind.
void check_recovers(const std::string& dir, const std::function<void(const std::string&)>& damage) {
  std::string path;
  {
    kjit::Compiler c(in(dir));
    path = kjit_test::entry_path(dir, c.key(spec(), "sm_90"));
    c.get(spec(), "sm_90");
  }
  REQUIRE(kjit_test::exists(path));
  damage(path);
  {
    kjit::Compiler c(in(dir));
    kjit::CompiledKernel k = c.get(spec(), "sm_90");
    CHECK_FALSE(k.from_disk);
    CHECK(k.binary == clean_binary());
    CHECK(c.stats().nvrtc_compiles == 1);
    CHECK(c.stats().disk.corrupt == 1);
  }
  kjit::Compiler c(in(dir));
  kjit::CompiledKernel k = c.get(spec(), "sm_90");
  CHECK(k.from_disk);  // the overwrite is a valid entry
  CHECK(k.binary == clean_binary());
}

}  // namespace

TEST_CASE("runtime: damaged entries recompile to the right binary and are overwritten") {
  SUBCASE("truncated to 0") {
    TempDir d;
    check_recovers(d.path(), [](const std::string& p) { kjit_test::write_file(p, ""); });
  }
  SUBCASE("truncated to half") {
    TempDir d;
    check_recovers(d.path(), [](const std::string& p) {
      std::string s = kjit_test::read_file(p);
      kjit_test::write_file(p, s.substr(0, s.size() / 2));
    });
  }
  SUBCASE("3 bytes overwritten mid-entry") {
    TempDir d;
    check_recovers(d.path(), [](const std::string& p) {
      std::string s = kjit_test::read_file(p);
      for (size_t i = 0; i < 3; ++i)
        s[s.size() / 2 + i] = static_cast<char>(s[s.size() / 2 + i] ^ 0x5a);
      kjit_test::write_file(p, s);
    });
  }
  SUBCASE("an entry copied under this key from another specialization") {
    TempDir d;
    std::string other_path;
    {
      kjit::Compiler c(in(d.path()));
      kjit::Spec other("kjit/test_kernels.cuh", "kjit::test_affine");
      other.type(kjit::DType::F32).value(1).value(2).value(true);
      c.get(other, "sm_90");
      other_path = kjit_test::entry_path(d.path(), c.key(other, "sm_90"));
    }
    check_recovers(d.path(), [&](const std::string& p) {
      kjit_test::write_file(p, kjit_test::read_file(other_path));
    });
  }
}

TEST_CASE("runtime: 8 processes asking for the same missing kernel compile it once") {
  TempDir d;
  const std::string counts = d / "compiles.txt";
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i)
    kids.push_back(kjit_test::spawn_child([&] {
      kjit::Compiler c(in(d.path()));
      kjit::CompiledKernel k = c.get(spec(), "sm_90");
      FILE* f = std::fopen(counts.c_str(), "a");
      std::fprintf(f, "%llu\n", static_cast<unsigned long long>(c.stats().nvrtc_compiles));
      std::fclose(f);
      return k.binary == clean_binary() ? 0 : 1;
    }));
  for (pid_t k : kids) CHECK(kjit_test::wait_child(k) == 0);
  std::string all = kjit_test::read_file(counts);
  CHECK(std::count(all.begin(), all.end(), '1') == 1);  // exactly one process compiled
  CHECK(std::count(all.begin(), all.end(), '\n') == 8);
}

TEST_CASE("runtime: a full disk fails the write, not the compile") {
  TempDir d;
  const int rc = kjit_test::in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};  // far smaller than a cubin
    setrlimit(RLIMIT_FSIZE, &lim);
    kjit::Compiler c(in(d.path()));
    kjit::CompiledKernel k = c.get(spec(), "sm_90");
    if (k.binary != clean_binary()) return 1;
    if (c.stats().disk.write_errors != 1) return 2;
    return 0;
  });
  CHECK(rc == 0);
  CHECK(kjit_test::count_files(d.path(), ".kjit") == 0);  // no partial entry
  CHECK(kjit_test::count_files(d.path(), ".tmp.") == 0);
}

TEST_CASE("runtime: read-only cache serves hits and writes nothing for misses") {
  TempDir d;
  { kjit::Compiler(in(d.path())).get(spec(), "sm_90"); }
  const auto before = kjit_test::snapshot(d.path());
  kjit::Compiler c(in(d.path(), kjit::cache::Mode::ReadOnly));
  CHECK(c.get(spec(), "sm_90").from_disk);
  kjit::Spec other("kjit/test_kernels.cuh", "kjit::test_affine");
  other.type(kjit::DType::F32).value(7).value(7).value(false);
  CHECK_FALSE(c.get(other, "sm_90").from_disk);
  CHECK(c.stats().nvrtc_compiles == 1);
  CHECK(kjit_test::snapshot(d.path()) == before);
}

TEST_CASE("runtime, GPU: the op is right after its cache entry was damaged") {
  std::string why;
  if (!kjit::gpu_available(&why)) {
    MESSAGE("no GPU (" << why << "): op check skipped; the compile-level cases above ran");
    return;
  }
  TempDir d;
  auto p = kjit::ops::GroupNormProblem::from_shape({2, 16, 5, 5}, 4, kjit::DType::F32);
  std::vector<float> x(2 * 16 * 25);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 7.f;
  auto run = [&] {
    kjit::RuntimeOptions o;
    o.cache = in(d.path());
    kjit::Runtime rt(o);
    kjit::Stream s(rt);
    kjit::DeviceBuffer dx(rt, x.size() * 4), dy(rt, x.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    dy.fill_bytes(0xFF);
    kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(dx.ptr()),
                          reinterpret_cast<void*>(dy.ptr()), nullptr, nullptr, {}, s);
    s.synchronize();
    std::vector<float> y(x.size());
    dy.download(y.data(), y.size() * 4);
    return y;
  };
  p.has_weight = p.has_bias = false;
  const std::vector<float> good = run();
  for (const auto& kv : kjit_test::snapshot(d.path()))
    if (kv.first.size() > 5 && kv.first.compare(kv.first.size() - 5, 5, ".kjit") == 0) {
      std::string s = kjit_test::read_file(kv.first);
      s[s.size() / 2] = static_cast<char>(s[s.size() / 2] ^ 0xff);
      kjit_test::write_file(kv.first, s);
    }
  CHECK(run() == good);
  for (float v : good) CHECK(std::isfinite(v));
}
