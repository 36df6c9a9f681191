// What the fake driver (fake_cuda.cpp) reads from a cubin that kjit hands to cuModuleLoadData:
// the image's size, and for each kernel its parameters' sizes, its static shared memory, its
// registers per thread and its __launch_bounds__, from the same ELF sections the real driver
// reads them from (.nv.info.<kernel>, .nv.shared.<kernel>, .nv.info, .text.<kernel>).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kjit_fake {

struct KernelInfo {
  std::vector<size_t> param_offsets, param_sizes;  // by ordinal
  size_t static_smem = 0;
  int regs = -1;        // per thread (the module-wide .nv.info's EIATTR_REGCOUNT); -1: none
  int max_threads = 0;  // __launch_bounds__'s first argument (EIATTR_MAX_THREADS); 0: none
};

struct CubinInfo {
  size_t image_bytes = 0;
  std::map<std::string, KernelInfo> kernels;  // by symbol name
};

// The cubin at `image` (an ELF64 file; its size is read from its own headers), or nullopt with
// *why when it is no well-formed cubin.
std::optional<CubinInfo> read_cubin(const void* image, std::string* why);

}  // namespace kjit_fake
