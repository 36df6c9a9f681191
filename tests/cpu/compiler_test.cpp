#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "kjit/kjit.hpp"
#include "test_util.hpp"

using kjit_test::cache_in;

namespace {

kjit::Spec affine(kjit::DType t, int scale) {
  kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_affine");
  s.type(t).value(scale).value(1).value(false);
  return s;
}

bool is_elf(const std::string& bin) {
  return bin.size() > 4 && bin.compare(0, 4,
                                       "\x7f"
                                       "ELF") == 0;
}

}  // namespace

TEST_CASE("built-in templates are embedded and their include closure is found") {
  kjit::TemplateSet t;
  CHECK(t.has("kjit/types.cuh"));
  CHECK(t.has("kjit/test_kernels.cuh"));
  auto c = t.closure("kjit/test_kernels.cuh");
  REQUIRE(c.size() == 3);  // test_kernels.cuh includes activation.cuh and types.cuh; sorted
  CHECK(c[0].first == "kjit/activation.cuh");
  CHECK(c[1].first == "kjit/test_kernels.cuh");
  CHECK(c[2].first == "kjit/types.cuh");
  CHECK_KJIT_ERROR(t.closure("nope.cuh"), kjit::Errc::NotFound);
  CHECK_KJIT_ERROR(t.add("../etc/passwd", "x"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(t.add_file("a.cuh", "/nonexistent/file.cuh"), kjit::Errc::Io);
  const uint64_t g = t.generation();
  CHECK_THROWS_WITH_AS(t.add_file("a.cuh", "/tmp"), doctest::Contains("is a directory"),
                       kjit::Error);  // not an empty header
  CHECK_FALSE(t.has("a.cuh"));
  CHECK(t.generation() == g);
}

// A header is text read from a regular file: a NUL byte, a FIFO (whose open would wait for a
// writer), a device that never ends, a pseudo-file and an oversized file are refused, each naming
// the path.
TEST_CASE(
    "templates: a NUL byte, a FIFO, a device, a pseudo-file and an oversized file are refused") {
  kjit::TemplateSet t;
  CHECK_THROWS_WITH_AS(t.add("app/nul.cuh", std::string("int a;\0 int b;", 15)),
                       doctest::Contains("NUL byte at offset 6"), kjit::Error);
  CHECK_FALSE(t.has("app/nul.cuh"));
  kjit_test::TempDir dir;
  const std::string fifo = dir.path + "/pipe.cuh";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_msg = fifo + "' for 'app/p.cuh': is not a regular file";
  CHECK_THROWS_WITH_AS(t.add_file("app/p.cuh", fifo), doctest::Contains(fifo_msg.c_str()),
                       kjit::Error);
  CHECK_THROWS_WITH_AS(t.add_file("app/z.cuh", "/dev/zero"),
                       doctest::Contains("is not a regular file"), kjit::Error);
  const std::string big = dir.path + "/big.cuh";
  {
    std::ofstream f(big);
    f << std::string(static_cast<size_t>(kjit::TemplateSet::kMaxTemplateFileBytes) + 1, ' ');
  }
  CHECK_THROWS_WITH_AS(t.add_file("app/big.cuh", big), doctest::Contains("more than a template"),
                       kjit::Error);
  CHECK_THROWS_WITH_AS(t.add_file("app/none.cuh", dir.path + "/none.cuh"),
                       doctest::Contains("cannot open it: No such file or directory"), kjit::Error);
  // A pseudo-file: regular by its status, of size 0, but it reads as text (never read as empty).
  if (::access("/proc/self/status", R_OK) == 0)
    CHECK_THROWS_WITH_AS(t.add_file("app/proc.cuh", "/proc/self/status"),
                         doctest::Contains("reads as more than the 0 bytes its status gives"),
                         kjit::Error);
  CHECK_FALSE(t.has("app/proc.cuh"));
  const std::string empty = dir.path + "/empty.cuh";
  { std::ofstream f(empty); }
  t.add_file("app/empty.cuh", empty);  // an empty regular file is read, as empty text
  CHECK(t.has("app/empty.cuh"));
  const std::string ok = dir.path + "/ok.cuh";
  {
    std::ofstream f(ok);
    f << "int ok;";
  }
  t.add_file("app/ok.cuh", ok);
  CHECK_KJIT_ERROR(t.add_file("app/nul.cuh", ok + std::string("\0.evil", 6)),
                   kjit::Errc::InvalidArgument);  // never ok.cuh, the path before the NUL
  CHECK_FALSE(t.has("app/nul.cuh"));
  CHECK(t.has("app/ok.cuh"));
}

// Every add() moves the generation on: Runtime::kernel re-reads a header's closure generation
// after one, so a header replaced through add() is loaded afresh (tests/gpu/launch_test.cpp runs
// both versions).
TEST_CASE("every add() moves the templates' generation on; a refused one does not") {
  kjit::TemplateSet t;
  const uint64_t g0 = t.generation();
  t.add("app/a.cuh", "int a;");
  CHECK(t.generation() == g0 + 1);
  t.add("app/a.cuh", "int a2;");  // a replacement counts too
  CHECK(t.generation() == g0 + 2);
  CHECK_KJIT_ERROR(t.add("../x.cuh", "x"), kjit::Errc::InvalidArgument);
  CHECK(t.generation() == g0 + 2);
}

// Runtime::kernel keys a loaded kernel by its header's closure generation: an add() of another
// header must leave it, a replaced included header must move it.
TEST_CASE("a header's closure generation moves with its own closure only") {
  kjit::TemplateSet t;
  CHECK(t.closure_generation("kjit/test_kernels.cuh") == 0);  // built-ins, never replaced
  t.add("app/inner.cuh", "int i;");
  t.add("app/outer.cuh", "#include \"app/inner.cuh\"\nint o;");
  const uint64_t g = t.closure_generation("app/outer.cuh");
  CHECK(g == t.generation());
  t.add("app/unrelated.cuh", "int u;");
  CHECK(t.closure_generation("app/outer.cuh") == g);
  t.add("app/inner.cuh", "int i2;");
  CHECK(t.closure_generation("app/outer.cuh") == t.generation());
  CHECK(t.closure_generation("app/outer.cuh") > g);
  CHECK(t.closure_generation("kjit/test_kernels.cuh") == 0);
  CHECK_KJIT_ERROR(t.closure_generation("nope.cuh"), kjit::Errc::NotFound);
}

TEST_CASE("NVRTC compiles a template to a cubin for sm_80 and sm_90 without a GPU") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (auto t : {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16}) {
      kjit::CompiledKernel k = c.compile(affine(t, 3), arch);
      CHECK(is_elf(k.binary));
      CHECK_FALSE(k.is_ptx);
      CHECK(k.arch == arch);
      CHECK(k.lowered_name.rfind("_Z", 0) == 0);  // a mangled C++ symbol
      CHECK(k.compile_ms > 0);
    }
  }
  CHECK(c.stats().nvrtc_compiles == 6);
}

TEST_CASE("compute_XX gives PTX") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  kjit::CompiledKernel k = c.compile(affine(kjit::DType::F32, 2), "compute_90");
  CHECK(k.is_ptx);
  CHECK(k.binary.find(".entry") != std::string::npos);
}

TEST_CASE("a bad arch is rejected with the supported list") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  CHECK_KJIT_ERROR(c.get(affine(kjit::DType::F32, 2), "sm_12"), kjit::Errc::Unsupported);
  CHECK_KJIT_ERROR(c.get(affine(kjit::DType::F32, 2), "gfx90a"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(c.get(affine(kjit::DType::F32, 2), "sm_"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(c.get(affine(kjit::DType::F32, 2), "sm_090"), kjit::Errc::InvalidArgument);
  CHECK(kjit::Compiler::arch_for_cc(90) == "sm_90");
  CHECK(kjit::Compiler::arch_for_cc(990).rfind("compute_", 0) == 0);
}

TEST_CASE("a compile error carries the NVRTC log, the instantiation and the options") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  c.templates().add("bad/broken.cuh",
                    "template <int N> __global__ void broken(int* y) { y[0] = N + undeclared; }\n");
  kjit::Spec s("bad/broken.cuh", "broken");
  s.value(7);
  try {
    c.get(s, "sm_90");
    FAIL("expected a compile error");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::Compile);
    CHECK(e.log().find("undeclared") != std::string::npos);
    std::string msg = e.what();
    CHECK(msg.find("broken<7>") != std::string::npos);
    CHECK(msg.find("--std=c++17") != std::string::npos);
    CHECK(msg.find("-arch=sm_90") != std::string::npos);
  }
  CHECK(c.disk_cache().stats().bytes_written == 0);  // nothing cached for a failure
}

TEST_CASE("the disk cache serves a second compiler; a template change misses") {
  kjit_test::TempDir dir;
  kjit::Spec s("app/k.cuh", "k");
  s.value(5);
  const std::string v1 = "template <int N> __global__ void k(int* y) { y[0] = N; }\n";
  const std::string v2 = "template <int N> __global__ void k(int* y) { y[0] = N + 1; }\n";
  {
    kjit::Compiler c(cache_in(dir.path));
    c.templates().add("app/k.cuh", v1);
    CHECK_FALSE(c.get(s, "sm_90").from_disk);
    CHECK(c.stats().nvrtc_compiles == 1);
  }
  kjit::Compiler c2(cache_in(dir.path));
  c2.templates().add("app/k.cuh", v1);
  kjit::CompiledKernel hit = c2.get(s, "sm_90");
  CHECK(hit.from_disk);
  CHECK(c2.stats().nvrtc_compiles == 0);
  CHECK(hit.lowered_name.rfind("_Z", 0) == 0);
  c2.get(s, "sm_80");  // another arch: another key
  CHECK(c2.stats().nvrtc_compiles == 1);
  c2.templates().add("app/k.cuh", v2);
  CHECK_FALSE(c2.get(s, "sm_90").from_disk);
  CHECK(c2.stats().nvrtc_compiles == 2);
}

TEST_CASE("an included header change changes the key") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  c.templates().add("app/inc.cuh", "#define VAL 1\n");
  c.templates().add("app/main.cuh",
                    "#include \"app/inc.cuh\"\n__global__ void k2(int* y) { y[0] = VAL; }\n");
  kjit::Spec s("app/main.cuh", "k2");
  kjit::cache::Key a = c.key(s, "sm_90");
  c.templates().add("app/inc.cuh", "#define VAL 2\n");
  CHECK(c.key(s, "sm_90") != a);
  c.templates().add("app/unrelated.cuh", "#define OTHER 3\n");
  kjit::cache::Key b = c.key(s, "sm_90");
  c.templates().add("app/unrelated.cuh", "#define OTHER 4\n");
  CHECK(c.key(s, "sm_90") == b);  // not in the closure: same key
}

// Two headers that include each other (one of the includes inside #if 0: the closure is found
// by scanning text) have the same closure; compiling one or the other as the program's root
// gives different code, so the root is part of the key, and an entry stored for one is never
// served for the other.
TEST_CASE("the root header is part of the key") {
  kjit_test::TempDir dir;
  const std::string fast = "#define SCALE 2\n#include \"app/slow.cuh\"\n";
  const std::string slow =
      "#if 0\n#include \"app/fast.cuh\"\n#endif\n#ifndef SCALE\n#define SCALE 1\n#endif\n"
      "template <int N> __global__ void k(int* y) { y[0] = N * SCALE; }\n";
  kjit::Spec on_fast("app/fast.cuh", "k"), on_slow("app/slow.cuh", "k");
  on_fast.value(3);
  on_slow.value(3);
  REQUIRE(on_fast.instantiation() == on_slow.instantiation());
  std::string fast_bin, slow_bin;
  {
    kjit::Compiler c(cache_in(dir.path));
    c.templates().add("app/fast.cuh", fast);
    c.templates().add("app/slow.cuh", slow);
    CHECK(c.key(on_fast, "sm_90") != c.key(on_slow, "sm_90"));
    fast_bin = c.get(on_fast, "sm_90").binary;
    slow_bin = c.get(on_slow, "sm_90").binary;
    CHECK(c.stats().nvrtc_compiles == 2);
    CHECK(fast_bin != slow_bin);
  }
  kjit::Compiler c2(cache_in(dir.path));
  c2.templates().add("app/fast.cuh", fast);
  c2.templates().add("app/slow.cuh", slow);
  const kjit::CompiledKernel s2 = c2.get(on_slow, "sm_90");
  CHECK(s2.from_disk);
  CHECK(s2.binary == slow_bin);
  const kjit::CompiledKernel f2 = c2.get(on_fast, "sm_90");
  CHECK(f2.from_disk);
  CHECK(f2.binary == fast_bin);
}

// A quoted include nobody registered is an error, never a file NVRTC finds on disk beside the
// including header's name (relative to the working directory): the key could not cover its text.
TEST_CASE("a header includes only registered headers, never a file from disk") {
  kjit_test::TempDir dir;
  const std::string app = dir.path + "/app";
  REQUIRE(std::filesystem::create_directories(app));
  { std::ofstream(app + "/cfg.h") << "#define CFG 100\n"; }
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path);
  struct Back {
    std::filesystem::path to;
    ~Back() { std::filesystem::current_path(to); }
  } back{cwd};
  kjit::Compiler c(cache_in(dir.path + "/cache"));
  c.templates().add(
      "app/k.cuh",
      "#include \"cfg.h\"\ntemplate <int N> __global__ void k(int* p) { *p = N + CFG; }\n");
  kjit::Spec s("app/k.cuh", "k");
  s.value(1);
  try {
    c.get(s, "sm_90");
    FAIL("app/cfg.h was read from disk");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::Compile);
    CHECK(std::string(e.what()).find("cfg.h") != std::string::npos);
  }
  c.templates().add("cfg.h", "#define CFG 7\n");  // registered: found, and in the key
  CHECK_FALSE(c.get(s, "sm_90").binary.empty());
}

// NVRTC opens any absolute path an include names: that file's text would be compiled but not
// covered by the cache key (a changed file would come back as a stale binary). add() refuses such
// includes however they are written, and reads the text as the preprocessor does.
TEST_CASE("a template that would make NVRTC read a file from disk is refused when added") {
  kjit::TemplateSet t;
  for (const char* bad :
       {"#include \"/etc/passwd\"\n", "#include </etc/passwd>\n", "  #  include \"../x.cuh\"\n",
        "%:include \"/tmp/x.h\"\n", "#define F \"/etc/passwd\"\n#include F\n",
        "#include_next \"app/a.cuh\"\n", "#embed \"x\"\n",
        "#if __has_include(\"/etc/shadow\")\n#endif\n",
        "#define xR\nconst char* s = xR\"(\";\n/**/ #include \"/tmp/x.h\"\n// )\"\n",
        "#inc\\\r\nlude \"/tmp/x.h\"\n", "int a;\r#include \"/tmp/x.h\"\n", "/* open",
        "\xEF\xBB\xBF#include \"/tmp/x.h\"\n", "\xC2\xA0#include \"/tmp/x.h\"\n",
        "#/*\n*/include \"/tmp/x.h\"\n",
        "#define X \xC3\xA9R\"(\" /* )\"\n#include \"/tmp/x.h\"\n// */\n",
        "const char* s = R\"a b(x)a b\";\n"}) {
    CAPTURE(bad);
    CHECK_KJIT_ERROR(t.add("app/bad.cuh", bad), kjit::Errc::InvalidArgument);
  }
  CHECK_FALSE(t.has("app/bad.cuh"));
  // Registered or relative names, NVRTC's own headers, and the same text in comments or strings.
  t.add("app/ok.cuh",
        "#include \"app/other.cuh\"\r\n#include <cuda_fp16.h>\n// #include \"/etc/passwd\"\n"
        "const char* s = R\"(\n#include \"x.h\"\n)\";\nint n = 1'000;\n");
  const auto incs = kjit::template_includes(
      "#include \"a.cuh\"\n#inc\\\nlude <b.h>\n#if __has_include(\"c.cuh\")\n#endif\n");
  REQUIRE(incs.size() == 3);
  CHECK((incs[0].target == "a.cuh" && !incs[0].angled && incs[0].line == 1));
  CHECK((incs[1].target == "b.h" && incs[1].angled && incs[1].line == 2));
  CHECK((incs[2].directive == "__has_include" && incs[2].target == "c.cuh" && incs[2].line == 4));
}

TEST_CASE("the key names the loaded NVRTC library's build") {
  const std::string& b = kjit::Compiler::nvrtc_build();
  MESSAGE("nvrtc build: " << b);
  if (b != "static") {  // NVRTC linked into the executable: nothing to name
    CHECK(b.find("nvrtc") != std::string::npos);
    CHECK(b.find(' ') != std::string::npos);
    CHECK(std::stoll(b.substr(b.find(' ') + 1)) > 0);
  }
}

// A template replaced while other threads compile must never leave one source's PTX under the
// other source's key: every later compiler reading the cache gets what its source says.
TEST_CASE(
    "a template replaced during compiles never caches one source's code under another's key") {
  kjit_test::TempDir dir;
  auto source = [](int offset) {
    return "template <int N> __global__ void k(int* y) { y[0] = N + " + std::to_string(offset) +
           "; }\n";
  };
  const int specs = 24;
  {
    kjit::Compiler c(cache_in(dir.path));
    c.templates().add("app/k.cuh", source(100));
    std::atomic<bool> done{false};
    std::thread swapper([&] {
      for (int i = 0; !done.load(); ++i) {
        c.templates().add("app/k.cuh", source(i % 2 ? 200 : 100));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    std::vector<std::thread> workers;
    for (int w = 0; w < 2; ++w)
      workers.emplace_back([&, w] {
        for (int n = w; n < specs; n += 2) {
          kjit::Spec s("app/k.cuh", "k");
          s.value(n);
          c.get(s, "compute_90");
        }
      });
    for (auto& t : workers) t.join();
    done.store(true);
    swapper.join();
  }
  for (int offset : {100, 200}) {
    kjit::Compiler c(cache_in(dir.path));
    c.templates().add("app/k.cuh", source(offset));
    for (int n = 0; n < specs; ++n) {
      kjit::Spec s("app/k.cuh", "k");
      s.value(n);
      const std::string ptx = c.get(s, "compute_90").binary;
      CAPTURE(offset);
      CAPTURE(n);
      CHECK(ptx.find(" " + std::to_string(n + offset) + ";") != std::string::npos);
      CHECK(ptx.find(" " + std::to_string(n + 300 - offset) + ";") == std::string::npos);
    }
  }
}

TEST_CASE("every built-in compiles warm in well under 100 ms (reported, not asserted)") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  c.compile(affine(kjit::DType::F32, 1), "sm_90");  // first compile in the process
  auto t0 = std::chrono::steady_clock::now();
  c.compile(affine(kjit::DType::BF16, 4), "sm_90");
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("warm compile of test_affine<bf16>: " << ms << " ms");
}

// check_driver: a success costs nothing (no driver needed); a failure is a kjit::Error naming the
// call and the driver's name for the result, or, without a driver to name it, NoDriver.
TEST_CASE("check_driver: success passes, a failure names the call and the result") {
  kjit::check_driver(CUDA_SUCCESS, "cuNothing");
  try {
    kjit::check_driver(CUDA_ERROR_INVALID_VALUE, "cuSomething");
    FAIL("check_driver accepted CUDA_ERROR_INVALID_VALUE");
  } catch (const kjit::Error& e) {
    const bool named = std::string(e.what()).find("cuSomething failed: CUDA_ERROR_INVALID_VALUE") !=
                       std::string::npos;
    if (kjit::gpu_available())
      CHECK((e.code() == kjit::Errc::Cuda && named));
    else  // a driver without a device names it too
      CHECK(((e.code() == kjit::Errc::Cuda && named) || e.code() == kjit::Errc::NoDriver));
  }
}

TEST_CASE("without a GPU, asking for one raises a clear error") {
  std::string why;
  if (kjit::gpu_available(&why)) {
    MESSAGE("a GPU is present; checking KJIT_DEVICE out of range instead");
    kjit::RuntimeOptions o;
    o.device = 4096;
    CHECK_KJIT_ERROR(kjit::Runtime{o}, kjit::Errc::NoDevice);
    return;
  }
  CHECK_FALSE(why.empty());
  try {
    kjit::Runtime rt;
    FAIL("Runtime constructed without a GPU");
  } catch (const kjit::Error& e) {
    CHECK((e.code() == kjit::Errc::NoDriver || e.code() == kjit::Errc::NoDevice));
    std::string msg = e.what();
    CHECK((msg.find("no CUDA driver") != std::string::npos ||
           msg.find("no CUDA device") != std::string::npos));
  }
}

TEST_CASE("the README's own-template example compiles as written") {
  kjit_test::TempDir dir;
  kjit::Compiler c(cache_in(dir.path));
  c.templates().add("app/scale.cuh", R"(
  template <class T, int kScale>
  __global__ void scale(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * kScale;
  })");
  kjit::CompiledKernel k =
      c.get(kjit::Spec("app/scale.cuh", "scale").type(kjit::DType::F32).value(3), "sm_90");
  CHECK(k.instantiation == "scale<float, 3>");
  CHECK(is_elf(k.binary));
}
