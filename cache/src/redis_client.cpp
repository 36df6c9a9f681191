#include "redis_client.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <ctime>

namespace kjit::cache::detail {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// hiredis writes with write(): a server that closed the connection would raise SIGPIPE, whose
// default action kills the process. A library may not change the process's handler, so SIGPIPE
// is blocked on this thread for the call, and one it raised is consumed before unblocking.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec zero{0, 0};
      const int saved = errno;
      while (sigtimedwait(&pipe, nullptr, &zero) == SIGPIPE) {
      }
      errno = saved;
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

std::string context_error(const redisContext* c) {
  return c->errstr[0] ? std::string(c->errstr) : "error " + std::to_string(c->err);
}

}  // namespace

std::unique_ptr<RedisConnection> RedisConnection::open(const RemoteUrl& url,
                                                       std::chrono::milliseconds connect_timeout,
                                                       std::chrono::milliseconds op_timeout,
                                                       std::string* why) {
  SigpipeGuard guard;
  redisContext* c =
      redisConnectWithTimeout(url.host.c_str(), url.port, to_timeval(connect_timeout));
  if (!c) {
    *why = "cannot allocate a connection";
    return nullptr;
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c, op_timeout));
  if (c->err) {
    *why = "cannot connect: " + context_error(c);
    return nullptr;
  }
  if (redisSetTimeout(c, to_timeval(op_timeout)) != REDIS_OK) {
    *why = "cannot set the timeout: " + context_error(c);
    return nullptr;
  }
  std::vector<std::string_view> auth = {"AUTH"};
  if (!url.user.empty()) auth.push_back(url.user);
  auth.push_back(url.password);
  const std::string db = std::to_string(url.db);
  for (const auto& args : {auth, std::vector<std::string_view>{"SELECT", db}}) {
    if (args[0] == "AUTH" && url.password.empty()) continue;
    if (args[0] == "SELECT" && url.db == 0) continue;
    std::string err;
    Reply r = conn->command(args, &err);
    if (!r) {
      *why = std::string(args[0]) + ": " + err;
      return nullptr;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      *why = std::string(args[0]) + " refused: " + std::string(r->str, r->len);
      return nullptr;
    }
  }
  return conn;
}

RedisConnection::~RedisConnection() {
  redisFree(ctx_);
}

Reply RedisConnection::command(const std::vector<std::string_view>& args, std::string* why) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  SigpipeGuard guard;
  errno = 0;
  void* raw = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
  const int err = errno;
  Reply r(static_cast<redisReply*>(raw));
  if (r) return r;
  timed_out_ = ctx_->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK);
  *why = timed_out_  ? "no reply within " + std::to_string(op_timeout_.count()) + " ms"
         : ctx_->err ? context_error(ctx_)
                     : "no reply";
  return r;
}

}  // namespace kjit::cache::detail
