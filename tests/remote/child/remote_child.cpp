// A process of the remote suite's cross-process cases: compiles `n` specializations of a test
// template through kjit::Compiler (the disk cache and remote tier from the environment, as a
// runtime would have them) and prints what it compiled, what the tier served, and a digest of
// every binary, for the parent to compare across processes.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "kjit/cache/key.hpp"
#include "kjit/compiler.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kjit_remote_child N ARCH\n");
    return 2;
  }
  try {
    const int n = std::atoi(argv[1]);
    kjit::Compiler compiler;
    for (int i = 1; i <= n; ++i) {
      kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_affine");
      s.type(kjit::DType::F32).value(i).value(1).value(false);
      const kjit::CompiledKernel k = compiler.get(s, argv[2]);
      const auto d = kjit::cache::sha256(k.binary);
      std::printf("kernel %d ", i);
      for (unsigned char b : d) std::printf("%02x", b);
      std::printf("\n");
    }
    const kjit::CompilerStats st = compiler.stats();
    std::printf("nvrtc %llu\nremote_hits %llu\nremote_enabled %d\n",
                static_cast<unsigned long long>(st.nvrtc_compiles),
                static_cast<unsigned long long>(st.remote.hits), st.remote_enabled ? 1 : 0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_remote_child: %s\n", e.what());
    return 1;
  }
}
