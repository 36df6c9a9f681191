// Several processes on one folder: one compile per missing key, no torn reads, no lost writes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

// Children block on the read end until the parent closes the write end: all start together.
struct StartGate {
  int fds[2];
  StartGate() { REQUIRE(::pipe(fds) == 0); }
  void wait_in_child() {
    ::close(fds[1]);
    char c;
    while (::read(fds[0], &c, 1) < 0 && errno == EINTR) {
    }
  }
  void open_gate() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
};

void append_line(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ssize_t n = ::write(fd, "make\n", 5);
  (void)n;
  ::close(fd);
}

}  // namespace

TEST_CASE("8 processes asking for the same missing key compile it once") {
  TempDir tmp, side;
  const std::string counter = side / "makes";
  const Key k = key_of("contended");
  const Entry expected = entry_of(std::string(20000, 'c'), "contended");
  StartGate gate;
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    kids.push_back(spawn_child([&] {
      gate.wait_in_child();
      DiskCache cache(options_for(tmp.path()));
      bool made = false;
      Entry e = cache.get_or_make(
          k,
          [&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a slow NVRTC
            append_line(counter);
            return expected;
          },
          &made);
      if (!same_entry(e, expected)) return 1;
      Stats s = cache.stats();
      if (s.compiles != (made ? 1u : 0u) || s.corrupt != 0 || s.write_errors != 0) return 2;
      return 0;
    }));
  }
  gate.open_gate();
  for (pid_t pid : kids) CHECK(wait_child(pid) == 0);
  CHECK(read_file(counter) == "make\n");
  DiskCache cache(options_for(tmp.path()));
  auto e = cache.get(k);
  REQUIRE(e);
  CHECK(same_entry(*e, expected));
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
  CHECK(count_files(tmp.path(), ".lock") == 0);
}

TEST_CASE("8 processes writing distinct keys at once: every entry valid") {
  TempDir tmp;
  constexpr int kProcs = 8, kKeys = 40;
  auto name = [](int p, int i) { return "p" + std::to_string(p) + "k" + std::to_string(i); };
  StartGate gate;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(spawn_child([&, p] {
      gate.wait_in_child();
      DiskCache cache(options_for(tmp.path()));
      for (int i = 0; i < kKeys; ++i)
        if (!cache.put(key_of(name(p, i)),
                       entry_of(std::string(8000 + i, char('a' + p)), name(p, i))))
          return 1;
      return 0;
    }));
  }
  gate.open_gate();
  for (pid_t pid : kids) CHECK(wait_child(pid) == 0);
  DiskCache cache(options_for(tmp.path()));
  auto infos = cache.list(true);
  CHECK(infos.size() == size_t{kProcs * kKeys});
  for (const auto& info : infos) CHECK_MESSAGE(info.valid, info.error);
  int bad = 0;
  for (int p = 0; p < kProcs; ++p)
    for (int i = 0; i < kKeys; ++i) {
      auto e = cache.get(key_of(name(p, i)));
      if (!e || e->label != name(p, i) || e->payload != std::string(8000 + i, char('a' + p))) ++bad;
    }
  CHECK(bad == 0);
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
}

TEST_CASE("a reader racing a writer's rename sees the old or the new entry, never a torn one") {
  TempDir tmp;
  const Key k = key_of("raced");
  const Entry a = entry_of(std::string(300000, 'a'), "a"),
              b = entry_of(std::string(200000, 'b'), "b");
  REQUIRE(DiskCache(options_for(tmp.path())).put(k, a));
  pid_t writer = spawn_child([&] {
    DiskCache cache(options_for(tmp.path()));
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
    for (int i = 0; std::chrono::steady_clock::now() < end; ++i)
      if (!cache.put(k, i % 2 ? a : b)) return 1;
    return 0;
  });
  DiskCache reader(options_for(tmp.path()));
  int reads = 0, saw_a = 0, saw_b = 0, wrong = 0;
  int status = -1;
  while (status < 0) {
    auto e = reader.get(k);
    ++reads;
    if (e && same_entry(*e, a))
      ++saw_a;
    else if (e && same_entry(*e, b))
      ++saw_b;
    else
      ++wrong;
    int st;
    if (::waitpid(writer, &st, WNOHANG) == writer) status = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
  }
  CHECK(status == 0);
  CHECK(wrong == 0);
  CHECK(reads > 100);
  CHECK(saw_a > 0);
  CHECK(saw_b > 0);
  Stats s = reader.stats();
  CHECK(s.misses == 0);
  CHECK(s.corrupt == 0);
  CHECK(s.read_errors == 0);
  MESSAGE("reads: " << reads << " (old " << saw_a << ", new " << saw_b << ")");
}
