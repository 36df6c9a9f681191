// A real redis-server for the remote suite: Debian's binary, started on a free loopback port in a
// temp folder (no persistence) and stopped at the end, plus a raw hiredis connection with which a
// test plays the hostile writer (header-only, not a suite source).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kjit_test {

// redis-server on PATH (or /usr/bin, /usr/sbin), "" when not installed.
inline std::string redis_server_binary() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/bin:/usr/sbin:/usr/local/bin";
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find(':', at);
    if (end == std::string::npos) end = path.size();
    const std::string candidate = path.substr(at, end - at) + "/redis-server";
    if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return {};
}

// A port nobody listens on right now (the kernel's choice for port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

// A loopback port that refuses every connection for as long as this lives: bound, never
// listened on, so that no other process (a concurrent suite's redis-server) can take it, which
// a port that free_port() merely found free allows.
class ClosedPort {
 public:
  ClosedPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("no port to hold");
    }
    port_ = ntohs(a.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RawReply = std::unique_ptr<redisReply, ReplyFree>;

class RedisServer {
 public:
  explicit RedisServer(std::string password = {}) : password_(std::move(password)) {
    char tmpl[] = "/tmp/kjit-redis-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      start();
    }
    if (pid_ <= 0) throw std::runtime_error("redis-server did not start (see " + dir_ + ")");
  }
  ~RedisServer() {
    stop(SIGTERM);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& password) const {
    return "redis://" + (password.empty() ? "" : ":" + password + "@") +
           "127.0.0.1:" + std::to_string(port_);
  }
  std::string url() const { return url(password_); }

  // SHUTDOWN NOSAVE to a password-less server on `port` (a test's leftover).
  static void shutdown(int port) {
    timeval tv{5, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err == 0) freeReplyObject(redisCommand(c, "SHUTDOWN NOSAVE"));
    if (c) redisFree(c);
  }
  void kill() { stop(SIGKILL); }
  void restart() {
    if (pid_ <= 0) start();
    if (pid_ <= 0) throw std::runtime_error("redis-server did not restart on its port");
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

  // One command on a fresh connection of the test's own (binary safe).
  RawReply command(const std::vector<std::string_view>& args) const {
    timeval tv{5, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    if (!password_.empty()) freeReplyObject(redisCommand(c, "AUTH %s", password_.c_str()));
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    RawReply r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    redisFree(c);
    return r;
  }
  std::string get(const std::string& name) const {
    RawReply r = command({"GET", name});
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }
  void set(const std::string& name, const std::string& value) const {
    command({"SET", name, value});
  }

 private:
  void start() {
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {
        redis_server_binary(), "--port", port,    "--bind", "127.0.0.1", "--save",           "",
        "--appendonly",        "no",     "--dir", dir_,     "--logfile", dir_ + "/redis.log"};
    if (!password_.empty()) args.insert(args.end(), {"--requirepass", password_});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // A suite that dies without its destructors (a crash, an abort, ctest's timeout kill)
      // takes its server with it, instead of leaving it running on the port. (The signal follows
      // the thread that forked: servers are started from a test's own thread.)
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(126);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    if (!wait_ready()) stop(SIGKILL);
  }
  bool wait_ready() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: the port was taken, say
        pid_ = -1;
        return false;
      }
      // Ours, not another suite's server that took the port between free_port() and the bind
      // (ours then exits, but may not have yet): its INFO names its process.
      RawReply r = command({"INFO", "server"});
      if (r && r->type == REDIS_REPLY_STRING &&
          std::string(r->str, r->len).find("\r\nprocess_id:" + std::to_string(pid_) + "\r\n") !=
              std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string password_, dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kjit_test
