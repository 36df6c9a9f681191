// What the tools ask of the remote tier's server (kjit-cache stats, pull), and the fleet-wide
// counters each process adds when its tier is destroyed. None of it is on a kernel's path.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "remote_impl.hpp"

namespace kjit::cache {

using detail::Reply;

namespace {

constexpr size_t kMaxScanKeys = 10000000;  // a pull that finds more stops (a wrong prefix, say)

// "name:value" lines of an INFO reply.
std::string info_field(std::string_view info, std::string_view name) {
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find("\r\n", at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (line.size() > name.size() && line.substr(0, name.size()) == name &&
        line[name.size()] == ':')
      return std::string(line.substr(name.size() + 1));
    at = end + 2;
  }
  return {};
}

const char* const kCounters[] = {"hits",   "misses",       "refused",   "oversized",
                                 "errors", "skipped",      "published", "publish_dropped",
                                 "gets",   "get_us_total", "leases",    "lease_waits"};

}  // namespace

void RemoteCache::Impl::send_fleet_counters() {
  const RemoteStats s = snapshot();
  const uint64_t values[] = {s.hits,   s.misses,       s.refused,   s.oversized,
                             s.errors, s.skipped,      s.published, s.publish_dropped,
                             s.gets,   s.get_us_total, s.leases,    s.lease_waits};
  static_assert(std::size(values) == std::size(kCounters));
  // A process that never reached the server has nothing to add (and could not add it).
  if (s.gets + s.published == 0 || !breaker.allow() || forked()) return;
  const std::string name = opts.prefix + "stats";
  for (size_t i = 0; i < std::size(kCounters); ++i) {
    if (values[i] == 0) continue;
    std::string why;
    const std::string n = std::to_string(values[i]);
    if (!run({"HINCRBY", name, kCounters[i], n}, &why)) return;
  }
}

std::optional<RemoteServerInfo> RemoteCache::server_info(std::string* why) {
  Impl& m = *impl_;
  RemoteServerInfo info;
  const int64_t t0 = detail::CircuitBreaker::now_ns();
  Reply pong = m.run({"PING"}, why);
  if (!pong) return std::nullopt;
  info.ping_us = static_cast<uint64_t>((detail::CircuitBreaker::now_ns() - t0) / 1000);
  Reply r = m.run({"INFO"}, why);
  if (!r) return std::nullopt;
  if (r->type == REDIS_REPLY_STRING) {
    const std::string_view text(r->str, r->len);
    info.version = info_field(text, "redis_version");
    info.used_memory = info_field(text, "used_memory_human");
    info.maxmemory_policy = info_field(text, "maxmemory_policy");
    info.keyspace = info_field(text, "db" + std::to_string(m.url.db));
  }
  Reply h = m.run({"HGETALL", m.opts.prefix + "stats"}, why);
  if (!h) return std::nullopt;
  if (h->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
      const redisReply* k = h->element[i];
      const redisReply* v = h->element[i + 1];
      if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
        info.fleet[std::string(k->str, k->len)] = std::strtoull(v->str, nullptr, 10);
    }
  return info;
}

std::optional<std::vector<Key>> RemoteCache::keys(std::string* why) {
  Impl& m = *impl_;
  std::vector<Key> out;
  std::string cursor = "0";
  const std::string pattern = m.opts.prefix + "*";
  do {
    Reply r = m.run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, why);
    if (!r) return std::nullopt;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      *why = "SCAN: unexpected reply from " + m.where;
      return std::nullopt;
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* names = r->element[1];
    for (size_t i = 0; i < names->elements; ++i) {
      const redisReply* n = names->element[i];
      if (n->type != REDIS_REPLY_STRING) continue;
      const std::string_view name(n->str, n->len);
      Key k;  // the stats hash and any foreign name under the prefix are skipped
      if (name.size() == m.opts.prefix.size() + 64 &&
          Key::from_hex(name.substr(m.opts.prefix.size()), &k))
        out.push_back(k);
    }
    if (out.size() > kMaxScanKeys) {
      *why = "more than " + std::to_string(kMaxScanKeys) + " keys under " + m.opts.prefix;
      return std::nullopt;
    }
  } while (cursor != "0");
  // SCAN may return a name twice (a rehash during the walk).
  std::sort(out.begin(), out.end(), [](const Key& a, const Key& b) { return a.bytes < b.bytes; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace kjit::cache
