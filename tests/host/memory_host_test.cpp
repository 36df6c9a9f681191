// The fake driver's device memory is not the host's: host code cannot read its addresses, as it
// cannot read a real GPU's, so a host path that dereferenced a device pointer would fail this
// suite instead of passing by accident. Copies still carry the bytes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "host_env.hpp"

namespace {

// Whether the host may read the byte at p: write(2) copies it into a pipe, and the kernel answers
// EFAULT for an address the process may not read (no signal, and no sanitizer sees a fault).
bool host_readable(uintptr_t p) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  errno = 0;
  const ssize_t n = write(fds[1], reinterpret_cast<const void*>(p), 1);
  const int err = errno;
  close(fds[0]);
  close(fds[1]);
  if (n != 1) REQUIRE(err == EFAULT);  // no other failure: the test would prove nothing
  return n == 1;
}

}  // namespace

TEST_CASE("fake device memory: copies carry the bytes; the host cannot read a device address") {
  kjit::Runtime& rt = kjit_host::runtime();
  std::vector<uint32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i * 2654435761u);
  const kjit::DeviceBuffer a = kjit::DeviceBuffer::from_host(rt, values);
  CHECK(a.to_host<uint32_t>(values.size()) == values);
  kjit::DeviceBuffer b(rt, 4096);
  b.fill_bytes(0x5a);
  CHECK(b.to_host<unsigned char>(4096) == std::vector<unsigned char>(4096, 0x5a));
  CHECK(a.ptr() != b.ptr());
  CHECK_FALSE(host_readable(static_cast<uintptr_t>(a.ptr())));
  CHECK_FALSE(host_readable(static_cast<uintptr_t>(b.ptr()) + 4095));
  // The probe itself: a host address reads fine.
  CHECK(host_readable(reinterpret_cast<uintptr_t>(values.data())));
}
