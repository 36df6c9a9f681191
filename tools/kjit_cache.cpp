// kjit-cache: look after a kjit disk cache: stats, list, verify, prune, clear, export, import;
// and, with a remote tier configured (KJIT_REMOTE_CACHE), push and pull between the two.
//
// Read-only commands (stats, list, verify, export) open the cache read-only, so they never touch a
// file (not even the LRU timestamps); prune, clear and import open it read-write.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kjit/cache/disk_cache.hpp"
#include "tool_util.hpp"

namespace {

using nlohmann::json;
namespace kc = kjit::cache;
using kjit::tools::format_age;
using kjit::tools::format_bytes;
// Labels, metadata, keys and paths come from entry files, which an imported archive or another
// user may have written: the text output prints every one of them through printable().
using kjit::tools::printable;

// One entry with what its metadata says (when it reads back valid).
struct Row {
  kc::EntryInfo info;
  std::string kind, arch, instantiation, header;
};

std::string meta(const kc::Entry& e, const char* name) {
  const std::string* v = e.find(name);
  return v ? *v : std::string();
}

std::vector<Row> rows(kc::DiskCache& cache) {
  std::vector<Row> out;
  for (kc::EntryInfo& info : cache.list(false)) {
    Row r;
    if (info.valid) {
      kc::Key key;
      std::optional<kc::Entry> e;
      if (kc::Key::from_hex(info.key_hex, &key)) e = cache.get(key);  // verifies the checksum
      if (e) {
        r.kind = meta(*e, "kind");
        r.arch = meta(*e, "arch");
        r.instantiation = meta(*e, "instantiation");
        r.header = meta(*e, "header");
      } else {
        info.valid = false;
        info.error = "does not verify (run kjit-cache verify)";
      }
    }
    r.info = std::move(info);
    out.push_back(std::move(r));
  }
  return out;
}

int64_t now_s() {
  return static_cast<int64_t>(std::time(nullptr));
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

// The remote tier's section of `stats`: what the server says, and the fleet-wide counters.
json remote_stats(kc::RemoteCache& remote) {
  json out = {{"url", remote.where()}};
  std::string why;
  const std::optional<kc::RemoteServerInfo> info = remote.server_info(&why);
  out["reachable"] = info.has_value();
  if (!info) {
    out["error"] = why;
    return out;
  }
  out["ping_us"] = info->ping_us;
  out["redis_version"] = info->version;
  out["used_memory"] = info->used_memory;
  out["maxmemory_policy"] = info->maxmemory_policy;
  out["keyspace"] = info->keyspace;
  out["fleet"] = info->fleet;
  return out;
}

void print_remote(const json& r) {
  std::printf("remote      %s", printable(r["url"].get<std::string>()).c_str());
  if (!r["reachable"].get<bool>()) {
    std::printf(" UNREACHABLE: %s\n", printable(r["error"].get<std::string>()).c_str());
    return;
  }
  std::printf(" (redis %s, ping %llu us, %s used, %s)\n",
              printable(r["redis_version"].get<std::string>()).c_str(),
              static_cast<unsigned long long>(r["ping_us"].get<uint64_t>()),
              printable(r["used_memory"].get<std::string>()).c_str(),
              printable(r["keyspace"].get<std::string>()).c_str());
  const std::string policy = r["maxmemory_policy"].get<std::string>();
  if (policy != "allkeys-lru")
    std::printf(
        "            maxmemory-policy %s: allkeys-lru is what keeps a full server "
        "serving (docs/TOOLS.md, \"Fleet deployment\")\n",
        printable(policy).c_str());
  const auto fleet = r["fleet"].get<std::map<std::string, uint64_t>>();
  const auto at = [&](const char* k) {
    auto it = fleet.find(k);
    return static_cast<unsigned long long>(it == fleet.end() ? 0 : it->second);
  };
  std::printf(
      "fleet       hits %llu, misses %llu, refused %llu, errors %llu, skipped %llu, "
      "published %llu, dropped %llu, mean lookup %.0f us, compiles under lease %llu, waits "
      "for one %llu\n",
      at("hits"), at("misses"), at("refused"), at("errors"), at("skipped"), at("published"),
      at("publish_dropped"),
      at("gets") ? static_cast<double>(at("get_us_total")) / at("gets") : 0.0, at("leases"),
      at("lease_waits"));
}

int cmd_stats(kc::DiskCache& cache, uint64_t max_bytes, bool as_json) {
  const std::vector<Row> all = rows(cache);
  uint64_t bytes = 0, invalid = 0;
  int64_t oldest = 0, newest = 0;
  std::map<std::string, uint64_t> kinds, archs;
  for (const Row& r : all) {
    bytes += r.info.size;
    if (!r.info.valid) {
      ++invalid;
      continue;
    }
    ++kinds[or_dash(r.kind)];
    if (!r.arch.empty()) ++archs[r.arch];
    if (oldest == 0 || r.info.mtime < oldest) oldest = r.info.mtime;
    if (r.info.mtime > newest) newest = r.info.mtime;
  }
  const int64_t now = now_s();
  std::error_code ec;
  const bool exists = std::filesystem::is_directory(cache.dir(), ec);
  if (as_json) {
    json out = {{"dir", cache.dir()}, {"exists", exists},       {"entries", all.size()},
                {"bytes", bytes},     {"max_bytes", max_bytes}, {"invalid", invalid},
                {"kinds", kinds},     {"archs", archs}};
    out["oldest_age_s"] = oldest ? json(now - oldest) : json(nullptr);
    out["newest_age_s"] = newest ? json(now - newest) : json(nullptr);
    if (cache.remote()) out["remote"] = remote_stats(*cache.remote());
    std::printf("%s\n", kjit::tools::json_text(out).c_str());
    return 0;
  }
  const bool other = !exists && std::filesystem::exists(cache.dir(), ec);
  std::printf("cache dir   %s%s\n", printable(cache.dir()).c_str(),
              exists  ? ""
              : other ? " (not a directory: the cache cannot use it)"
                      : " (does not exist yet)");
  std::printf("entries     %zu", all.size());
  for (const auto& [k, n] : kinds)
    std::printf("%s%s %llu", k == kinds.begin()->first ? " (" : ", ", printable(k).c_str(),
                static_cast<unsigned long long>(n));
  std::printf("%s\n", kinds.empty() ? "" : ")");
  std::printf("size        %s", format_bytes(bytes).c_str());
  if (max_bytes)
    std::printf(" of %s cap (%.0f%%)", format_bytes(max_bytes).c_str(),
                100.0 * static_cast<double>(bytes) / static_cast<double>(max_bytes));
  std::printf("\n");
  if (!archs.empty()) {
    std::printf("archs      ");
    for (const auto& [a, n] : archs)
      std::printf(" %s: %llu", printable(a).c_str(), static_cast<unsigned long long>(n));
    std::printf("\n");
  }
  if (oldest)
    std::printf("last used   newest %s ago, oldest %s ago\n", format_age(now - newest).c_str(),
                format_age(now - oldest).c_str());
  if (invalid)
    std::printf("invalid     %llu (run kjit-cache verify)\n",
                static_cast<unsigned long long>(invalid));
  if (cache.remote()) print_remote(remote_stats(*cache.remote()));
  return 0;
}

int cmd_list(kc::DiskCache& cache, bool as_json, bool full_keys) {
  const std::vector<Row> all = rows(cache);
  const int64_t now = now_s();
  if (as_json) {
    json out = json::array();
    for (const Row& r : all) {
      json e = {{"key", r.info.key_hex}, {"label", r.info.label},       {"kind", r.kind},
                {"arch", r.arch},        {"header", r.header},          {"size", r.info.size},
                {"mtime", r.info.mtime}, {"age_s", now - r.info.mtime}, {"path", r.info.path},
                {"valid", r.info.valid}};
      e["instantiation"] = r.instantiation;
      if (!r.info.valid) e["error"] = r.info.error;
      out.push_back(std::move(e));
    }
    std::printf("%s\n", kjit::tools::json_text(out).c_str());
    return 0;
  }
  const int kw = full_keys ? 64 : 16;
  std::printf("%-*s  %-6s  %-8s  %10s  %5s  %s\n", kw, "KEY", "KIND", "ARCH", "SIZE", "AGE",
              "LABEL");
  for (const Row& r : all) {
    std::string label = r.info.valid ? r.info.label : "INVALID: " + r.info.error;
    std::printf("%-*s  %-6s  %-8s  %10s  %5s  %s\n", kw,
                printable(r.info.key_hex.substr(0, kw)).c_str(), printable(or_dash(r.kind)).c_str(),
                printable(or_dash(r.arch)).c_str(), format_bytes(r.info.size).c_str(),
                format_age(now - r.info.mtime).c_str(), printable(label).c_str());
  }
  std::printf("%zu entries\n", all.size());
  return 0;
}

int cmd_verify(kc::DiskCache& cache, bool as_json) {
  const std::vector<kc::EntryInfo> all = cache.list(true);
  json bad = json::array();
  for (const kc::EntryInfo& e : all)
    if (!e.valid)
      bad.push_back({{"key", e.key_hex}, {"path", e.path}, {"label", e.label}, {"error", e.error}});
  if (as_json) {
    std::printf("%s\n", kjit::tools::json_text(json{{"dir", cache.dir()},
                                                    {"entries", all.size()},
                                                    {"ok", all.size() - bad.size()},
                                                    {"bad", bad}})
                            .c_str());
  } else {
    for (const json& b : bad)
      std::printf("BAD %s  %s: %s\n", printable(b["key"].get<std::string>()).c_str(),
                  printable(b["path"].get<std::string>()).c_str(),
                  printable(b["error"].get<std::string>()).c_str());
    std::printf("%zu entries verified in %s: %zu ok, %zu bad\n", all.size(),
                printable(cache.dir()).c_str(), all.size() - bad.size(), bad.size());
    if (!bad.empty())
      std::printf(
          "(bad entries are recompiled on next use; kjit-cache clear or prune removes "
          "them)\n");
  }
  return bad.empty() ? 0 : 1;
}

// Every valid entry of the disk cache, stored on the server (synchronously, one at a time).
int cmd_push(kc::DiskCache& cache, kc::RemoteCache& remote) {
  uint64_t pushed = 0, failed = 0;
  for (const kc::EntryInfo& info : cache.list(false)) {
    kc::Key key;
    if (!info.valid || !kc::Key::from_hex(info.key_hex, &key)) continue;
    const std::optional<kc::Entry> e = cache.get(key);  // verified, trusted
    if (e && remote.publish_now(key, *e))
      ++pushed;
    else
      ++failed;
  }
  const kc::RemoteStats s = remote.stats();
  std::printf(
      "pushed %llu entries from %s to %s (%llu not pushed: %llu over the size limit, "
      "%llu errors)\n",
      static_cast<unsigned long long>(pushed), printable(cache.dir()).c_str(),
      printable(remote.where()).c_str(), static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(s.oversized), static_cast<unsigned long long>(s.errors));
  return failed - s.oversized == 0 ? 0 : 1;
}

// Every value on the server that this cache lacks, verified and written to disk.
int cmd_pull(kc::DiskCache& cache, kc::RemoteCache& remote) {
  std::string why;
  const std::optional<std::vector<kc::Key>> keys = remote.keys(&why);
  if (!keys) {
    std::fprintf(stderr, "kjit-cache pull: %s\n", printable(why).c_str());
    return 1;
  }
  const uint64_t disk_hits = cache.stats().hits;
  const uint64_t written = cache.stats().bytes_written;
  for (const kc::Key& k : *keys)
    cache.get(k);  // a disk hit, or the remote tier's verified entry, written to disk (counted)
  const kc::RemoteStats s = remote.stats();
  std::printf(
      "pulled %llu entries from %s into %s (%llu already there, %llu refused, %llu "
      "errors, %llu gone; %s written)\n",
      static_cast<unsigned long long>(s.hits), printable(remote.where()).c_str(),
      printable(cache.dir()).c_str(),
      static_cast<unsigned long long>(cache.stats().hits - disk_hits),
      static_cast<unsigned long long>(s.refused), static_cast<unsigned long long>(s.errors),
      static_cast<unsigned long long>(s.misses),
      format_bytes(cache.stats().bytes_written - written).c_str());
  return s.refused + s.errors == 0 ? 0 : 1;
}

bool require_writable(kc::DiskCache& cache, const char* what) {
  if (cache.mode() == kc::Mode::ReadWrite) return true;
  std::fprintf(
      stderr, "%s\n",
      printable(kjit::tools::not_writable_text(std::string("kjit-cache ") + what, cache)).c_str());
  return false;
}

int cmd_prune(kc::DiskCache& cache, std::optional<uint64_t> target_bytes,
              std::optional<std::chrono::seconds> max_age) {
  if (!require_writable(cache, "prune")) return 1;
  const uint64_t before = cache.total_bytes();
  const uint64_t n = cache.prune(target_bytes, max_age);
  const uint64_t after = cache.total_bytes();
  std::printf("pruned %llu entries from %s: %s -> %s\n", static_cast<unsigned long long>(n),
              printable(cache.dir()).c_str(), format_bytes(before).c_str(),
              format_bytes(after).c_str());
  return 0;
}

int cmd_clear(kc::DiskCache& cache) {
  if (!require_writable(cache, "clear")) return 1;
  const uint64_t n = cache.clear();
  std::printf("removed %llu entries from %s\n", static_cast<unsigned long long>(n),
              printable(cache.dir()).c_str());
  return 0;
}

int cmd_export(kc::DiskCache& cache, const std::string& file) {
  // The archive is written beside FILE and renamed over it: that would replace a pipe, a
  // device or a symlink's target link with a plain file instead of writing into it.
  struct stat st;
  if (::lstat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "kjit-cache export: %s exists and is not a regular file\n",
                 printable(file).c_str());
    return 2;
  }
  const uint64_t n = cache.export_to(file);
  std::printf("exported %llu entries from %s to %s\n", static_cast<unsigned long long>(n),
              printable(cache.dir()).c_str(), printable(file).c_str());
  return 0;
}

int cmd_import(kc::DiskCache& cache, const std::string& file) {
  if (!require_writable(cache, "import")) return 1;
  const uint64_t oversized = cache.stats().oversized;
  const uint64_t n = cache.import_from(file);
  const uint64_t skipped = cache.stats().oversized - oversized;
  std::printf("imported %llu entries from %s into %s", static_cast<unsigned long long>(n),
              printable(file).c_str(), printable(cache.dir()).c_str());
  if (skipped)
    std::printf(" (%llu skipped: over half the size cap)",
                static_cast<unsigned long long>(skipped));
  std::printf("\n");
  return 0;
}

struct Args {
  std::string cache_dir, max_size, older_than, file;
  bool json_out = false, full_keys = false;
};

// The subcommands, each parsed() when given.
struct Commands {
  CLI::App *stats, *list, *verify, *prune, *clear, *exp, *imp, *push, *pull;
  bool writes() const {
    return prune->parsed() || clear->parsed() || imp->parsed() || pull->parsed();
  }
};

Commands add_commands(CLI::App& app, Args& a) {
  Commands c{};
  c.stats = app.add_subcommand("stats", "entries, size, cap, kinds and archs");
  c.stats->add_flag("--json", a.json_out, "one JSON object");
  c.list = app.add_subcommand("list", "one line per entry: key, kind, arch, size, age");
  c.list->add_flag("--json", a.json_out, "a JSON array of entries (full keys, paths, metadata)");
  c.list->add_flag("--full-keys", a.full_keys, "print the whole 64-digit key");
  c.verify = app.add_subcommand("verify", "check every entry's checksum; exit 1 if any is bad");
  c.verify->add_flag("--json", a.json_out, "one JSON object");
  c.prune = app.add_subcommand(
      "prune", "remove least recently used entries down to a size and/or older than an age");
  c.prune->add_option("--max-size", a.max_size, "keep at most this much: bytes or 512K, 64M, 2G");
  c.prune->add_option("--older-than", a.older_than,
                      "remove entries not used for this long: 90m, 12h, 30d, 2w (or seconds)");
  c.clear = app.add_subcommand("clear", "remove every entry");
  c.exp = app.add_subcommand("export", "write every valid entry into one archive file");
  c.exp->add_option("FILE", a.file, "archive to write (replaced atomically)")->required();
  c.imp = app.add_subcommand(
      "import", "verify an archive, then publish its entries into the cache (atomically each)");
  c.imp->add_option("FILE", a.file, "archive to read")->required();
  c.push = app.add_subcommand(
      "push", "store every valid entry on the remote tier (KJIT_REMOTE_CACHE, signed)");
  c.pull = app.add_subcommand(
      "pull", "verify every value of the remote tier that the cache lacks and write it to disk");
  return c;
}

// prune's limits, or the exit code of a missing or malformed one (printed).
struct PruneLimits {
  std::optional<uint64_t> bytes;
  std::optional<std::chrono::seconds> age;
};

std::optional<int> parse_prune_limits(const Args& a, PruneLimits* l) {
  if (a.max_size.empty() && a.older_than.empty()) {
    std::fprintf(stderr, "kjit-cache prune: give --max-size and/or --older-than\n");
    return 2;
  }
  if (!a.max_size.empty() && !(l->bytes = kjit::tools::parse_size(a.max_size))) {
    std::fprintf(stderr,
                 "kjit-cache prune: --max-size '%s' is not a size (bytes, or with a K, M, G "
                 "or T suffix)\n",
                 printable(a.max_size).c_str());
    return 2;
  }
  if (!a.older_than.empty() && !(l->age = kjit::tools::parse_duration(a.older_than))) {
    std::fprintf(stderr,
                 "kjit-cache prune: --older-than '%s' is not a duration (a number with s, m, "
                 "h, d or w, of at most 100 years)\n",
                 printable(a.older_than).c_str());
    return 2;
  }
  return std::nullopt;
}

// Why this cache cannot serve the command (printed), as the exit code; nothing when it can.
std::optional<int> cache_problem(kc::DiskCache& cache, const Commands& c) {
  if (const std::string refused = kjit::tools::refused_text("kjit-cache", cache);
      !refused.empty()) {
    std::fprintf(stderr, "%s\n", printable(refused).c_str());
    return 1;
  }
  // A folder that exists but cannot be read (a file, FIFO or device at its name or above it,
  // no permission to search it) is no empty cache: say so rather than report "0 entries, 0 bad"
  // about it (or export an empty archive from it).
  if (!cache.usable()) {
    std::fprintf(stderr, "kjit-cache: cache folder %s cannot be used: %s\n",
                 printable(cache.dir()).c_str(), printable(cache.read_only_reason()).c_str());
    return 1;
  }
  if ((c.push->parsed() || c.pull->parsed()) && !cache.remote()) {
    std::fprintf(stderr,
                 "kjit-cache %s: no remote tier: set KJIT_REMOTE_CACHE=redis://host:port "
                 "and KJIT_REMOTE_CACHE_KEY or KJIT_REMOTE_CACHE_KEY_FILE\n",
                 c.push->parsed() ? "push" : "pull");
    return 2;
  }
  return std::nullopt;
}

int dispatch(kc::DiskCache& cache, const kc::Options& opts, const Commands& c, const Args& a,
             const PruneLimits& limits) {
  if (c.push->parsed()) return cmd_push(cache, *cache.remote());
  if (c.pull->parsed())
    return require_writable(cache, "pull") ? cmd_pull(cache, *cache.remote()) : 1;
  if (c.stats->parsed()) return cmd_stats(cache, opts.max_bytes, a.json_out);
  if (c.list->parsed()) return cmd_list(cache, a.json_out, a.full_keys);
  if (c.verify->parsed()) return cmd_verify(cache, a.json_out);
  if (c.prune->parsed()) return cmd_prune(cache, limits.bytes, limits.age);
  if (c.clear->parsed()) return cmd_clear(cache);
  if (c.exp->parsed()) return cmd_export(cache, a.file);
  if (c.imp->parsed()) return cmd_import(cache, a.file);
  return 2;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"kjit-cache: inspect and maintain a kjit disk cache"};
  app.require_subcommand(1);
  app.fallthrough();  // --cache-dir before or after the subcommand
  Args a;
  app.add_option("--cache-dir", a.cache_dir,
                 "cache folder (default: KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else "
                 "~/.cache/kjit)")
      ->check(kjit::tools::not_empty);
  const Commands c = add_commands(app, a);
  if (const auto rc = kjit::tools::parse_args(app, argc, argv)) return *rc;
  PruneLimits limits;
  if (c.prune->parsed())
    if (const auto rc = parse_prune_limits(a, &limits)) return *rc;
  const kc::Options opts = kjit::tools::cache_options(
      a.cache_dir, c.writes() ? kc::Mode::ReadWrite : kc::Mode::ReadOnly);
  try {
    kc::DiskCache cache(opts);
    if (const auto rc = cache_problem(cache, c)) return *rc;
    return dispatch(cache, opts, c, a, limits);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit-cache: %s\n", printable(e.what()).c_str());
    return 1;
  }
}

int main(int argc, char** argv) {
  return kjit::tools::finish_output("kjit-cache", run(argc, argv));
}
