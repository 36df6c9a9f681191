// The fake driver's device memory is not the host's: its addresses fault when host code reads
// them, as a real GPU's do, so a host path that dereferenced a device pointer would fail this
// suite instead of passing by accident. Copies still carry the bytes.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "host_env.hpp"

namespace {

// Whether a child process that reads one byte at p ends normally (it must not).
bool host_read_survives(uintptr_t p) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const volatile unsigned char* byte = reinterpret_cast<const volatile unsigned char*>(p);
    _exit(*byte == 0x5a ? 0 : 0);  // either value: only reaching here counts
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("fake device memory: copies carry the bytes; a host read of a device address faults") {
  kjit::Runtime& rt = kjit_host::runtime();
  std::vector<uint32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i * 2654435761u);
  const kjit::DeviceBuffer a = kjit::DeviceBuffer::from_host(rt, values);
  CHECK(a.to_host<uint32_t>(values.size()) == values);
  kjit::DeviceBuffer b(rt, 4096);
  b.fill_bytes(0x5a);
  CHECK(b.to_host<unsigned char>(4096) == std::vector<unsigned char>(4096, 0x5a));
  CHECK(a.ptr() != b.ptr());
  CHECK_FALSE(host_read_survives(static_cast<uintptr_t>(a.ptr())));
  CHECK_FALSE(host_read_survives(static_cast<uintptr_t>(b.ptr()) + 4095));
  // The probe itself: a host address reads fine in the same child.
  CHECK(host_read_survives(reinterpret_cast<uintptr_t>(values.data())));
}
