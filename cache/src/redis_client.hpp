// One blocking hiredis connection with timeouts on every call (private to kjit_cache).
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kjit/cache/remote_cache.hpp"

namespace kjit::cache::detail {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisConnection {
 public:
  // Connects (bounded by connect_timeout), sets op_timeout on the socket, then AUTH and SELECT.
  // nullptr and *why on failure (the password never appears in *why).
  static std::unique_ptr<RedisConnection> open(const RemoteUrl& url,
                                               std::chrono::milliseconds connect_timeout,
                                               std::chrono::milliseconds op_timeout,
                                               std::string* why);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // One command, binary safe. nullptr and *why on an I/O or protocol failure (after which the
  // connection is broken and must be dropped); an error reply is returned as a reply.
  Reply command(const std::vector<std::string_view>& args, std::string* why);
  bool broken() const { return ctx_->err != 0; }
  // The last failure was the timeout (the server is slow or paused), not a closed connection.
  bool timed_out() const { return timed_out_; }

 private:
  RedisConnection(redisContext* c, std::chrono::milliseconds op_timeout)
      : ctx_(c), op_timeout_(op_timeout) {}
  redisContext* ctx_;
  std::chrono::milliseconds op_timeout_;
  bool timed_out_ = false;
};

}  // namespace kjit::cache::detail
