// kjit-precompile: fill a kjit disk cache ahead of time, without a GPU, so that an application's
// first calls load cubins from disk instead of waiting for NVRTC.
//
// Problems (from manifests, --problem options, or the embedded default manifest) go through the
// op registry (manifest.cpp) to the exact specializations the runtime compiles for them; kernel
// entries (a recording's, kernel_entry.cpp) name theirs, with their headers' texts checked
// against the recorded hashes. The distinct (specialization, arch) pairs are compiled by -j
// worker threads through kjit::Compilers that look in the disk cache first.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "kernel_entry.hpp"
#include "kjit/kjit.hpp"
#include "kjit/op/registry.hpp"
#include "manifest.hpp"
#include "tool_util.hpp"

namespace {

using kjit::Target;
using kjit::tools::EntryError;
using kjit::tools::printable;  // every text line prints manifest, file and cache text through it
using kjit::tools::ProblemEntry;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

enum class Status { Pending, Compiled, Cached, Failed };

const char* status_name(Status s) {
  switch (s) {
    case Status::Compiled:
      return "compiled";
    case Status::Cached:
      return "cached";
    case Status::Failed:
      return "failed";
    case Status::Pending:
      break;
  }
  return "pending";
}

// One distinct (specialization, arch) to compile, and the problems that need it.
struct Job {
  Job(kjit::Spec s, Target t, kjit::Compiler* c)
      : spec(std::move(s)), target(std::move(t)), compiler(c) {}
  kjit::Spec spec;
  Target target;
  kjit::Compiler* compiler;          // holds the texts of the spec's headers
  std::vector<std::string> entries;  // ProblemEntry::name() of each problem that asked for it
  std::set<std::string> entry_set;   // the same names, to add each once in O(log n)
  Status status = Status::Pending;
  double ms = 0;
  size_t bytes = 0;
  std::string key_hex;
  std::string error;
  bool remote = false;  // --remote: store it on the remote tier too
};

struct EntryFailure {
  std::string entry;
  size_t index = 0;
  std::string source, field, message;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Progress output. On a terminal: one bar redrawn in place (failures printed above it). Otherwise
// one plain line per kernel. Nothing on stdout with --json (errors still go to stderr).
class Reporter {
 public:
  Reporter(size_t total, bool json, bool quiet)
      : total_(total),
        json_(json),
        quiet_(quiet),
        tty_(!json && isatty(STDOUT_FILENO)),
        t0_(Clock::now()) {}

  void done(const Job& j) {
    std::lock_guard<std::mutex> lock(mu_);
    ++finished_;
    if (j.status == Status::Compiled) ++compiled_;
    if (j.status == Status::Cached) ++cached_;
    if (j.status == Status::Failed) ++failed_;
    if (j.status == Status::Failed) {
      clear_bar();
      std::fprintf(stderr, "kjit-precompile: FAILED %s for %s (%s): %s\n",
                   printable(j.spec.instantiation()).c_str(), printable(j.target.arch).c_str(),
                   printable(j.entries[0]).c_str(), printable(j.error).c_str());
    }
    if (json_) return;
    if (tty_) {
      draw_bar();
    } else if (!quiet_) {
      std::printf("[%*zu/%zu] %-8s %-8s %8.1f ms  %s\n", width(), finished_, total_,
                  status_name(j.status), printable(j.target.arch).c_str(), j.ms,
                  printable(j.spec.instantiation()).c_str());
      std::fflush(stdout);
    }
  }

  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (tty_ && drawn_) {
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  size_t compiled() const { return compiled_; }
  size_t cached() const { return cached_; }
  size_t failed() const { return failed_; }

 private:
  int width() const { return static_cast<int>(std::to_string(total_).size()); }

  void clear_bar() {
    if (tty_ && drawn_) {
      std::printf("\r\033[K");
      std::fflush(stdout);
    }
  }

  void draw_bar() {
    constexpr size_t kWidth = 30;
    const size_t fill = total_ ? finished_ * kWidth / total_ : kWidth;
    std::string bar(fill, '#');
    bar.append(kWidth - fill, '.');
    const double secs = seconds_since(t0_);
    std::string eta;  // the mean time per kernel so far, times the kernels left
    if (finished_ > 0 && finished_ < total_)
      eta = "  ETA " +
            std::to_string(static_cast<int>(secs / static_cast<double>(finished_) *
                                                static_cast<double>(total_ - finished_) +
                                            0.5)) +
            "s";
    std::printf("\r\033[K[%s] %zu/%zu  compiled %zu  cached %zu  failed %zu  %.1fs%s", bar.c_str(),
                finished_, total_, compiled_, cached_, failed_, secs, eta.c_str());
    std::fflush(stdout);
    drawn_ = true;
  }

  std::mutex mu_;
  size_t total_, finished_ = 0, compiled_ = 0, cached_ = 0, failed_ = 0;
  bool json_, quiet_, tty_, drawn_ = false;
  Clock::time_point t0_;
};

// Why a compiled entry is not in the cache: the write's own error when there was one (the path
// and the OS's reason), else what else removes or refuses an entry.
std::string not_stored_reason(kjit::Compiler& compiler) {
  const std::string why = compiler.disk_cache().last_error();
  if (!why.empty()) return why;
  if (compiler.disk_cache().stats().oversized)
    return "it is over half of the size cap (KJIT_CACHE_MAX_SIZE)";
  return "evicted at once by the size cap (KJIT_CACHE_MAX_SIZE)";
}

// --remote: the entry the disk cache holds, signed and stored on the server before the job counts.
void push_to_remote(Job& job, const kjit::cache::Key& key) {
  kjit::cache::DiskCache& disk = job.compiler->disk_cache();
  const std::optional<kjit::cache::Entry> e = disk.get(key);
  std::string why = "it is not in the disk cache";
  if (e && disk.remote()->publish_now(key, *e, &why)) return;
  job.status = Status::Failed;
  job.error = "not stored on the remote tier " + disk.remote()->where() + ": " + why;
}

void compile_job(Job& job) {
  kjit::Compiler& compiler = *job.compiler;
  const auto t0 = Clock::now();
  try {
    kjit::CompiledKernel k = compiler.get(job.spec, job.target.arch);
    const kjit::cache::Key key = compiler.key(job.spec, job.target.arch);
    job.key_hex = key.hex();
    job.bytes = k.binary.size();
    if (k.from_disk) {
      job.status = Status::Cached;
    } else if (compiler.disk_cache().get(key)) {  // compiled: make sure it reached the cache
      job.status = Status::Compiled;
    } else {
      job.status = Status::Failed;
      job.error = "compiled, but the entry is not in the cache: " + not_stored_reason(compiler);
    }
    if (job.remote && job.status != Status::Failed) push_to_remote(job, key);
  } catch (const kjit::Error& e) {
    job.status = Status::Failed;
    job.error = std::string(kjit::errc_name(e.code())) + ": " + e.what();
  } catch (const std::exception& e) {
    job.status = Status::Failed;
    job.error = e.what();
  }
  job.ms = seconds_since(t0) * 1000;
}

// The current device's target, else sm_90.
Target default_target(std::string* note) {
  *note = "default; no GPU here";
  if (kjit::gpu_available()) {
    try {
      kjit::Runtime rt;
      *note = "the current device, " + rt.props().name;
      return Target::of(rt);
    } catch (const kjit::Error& e) {
      *note = std::string("default; the GPU could not be opened: ") + e.what();
    }
  }
  return Target::for_arch("sm_90");
}

struct Options {
  std::vector<std::string> manifests, problem_args, arch_args, bundle_args;
  std::string cache_dir, templates_dir;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  int sm_count = 0;
  bool all_candidates = false, unaligned = false, json_out = false, quiet = false;
  bool dry_run = false, print_manifest = false, list_ops = false, remote = false;
};

// What to compile and for which targets.
void add_inputs(CLI::App& app, Options& o) {
  app.add_option("manifest", o.manifests,
                 "JSON manifest file(s): {\"problems\": [...], \"archs\": [...]}; - reads stdin");
  app.add_option("-p,--problem", o.problem_args,
                 "a problem: JSON object, or short form e.g. "
                 "'group_norm f32 nchw 8x256x24x24 g=32 silu' (repeatable)")
      ->allow_extra_args(false);
  app.add_option("-a,--arch", o.arch_args,
                 "target arch(s): sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, compute_90, ... "
                 "(repeatable or comma-separated; default: the manifest's \"archs\", else the "
                 "current GPU, else sm_90)")
      ->allow_extra_args(false);
  app.add_option("--cache-dir", o.cache_dir,
                 "cache folder (default: KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else "
                 "~/.cache/kjit)")
      ->check(kjit::tools::not_empty);
  app.add_option("--templates", o.templates_dir,
                 "a folder with the app's template headers under their registered names, for "
                 "kernel entries whose recording has no bundle (<manifest>.d)")
      ->check(kjit::tools::not_empty);
  app.add_option("--bundle", o.bundle_args,
                 "a recording's bundle folder (content-addressed header copies), besides each "
                 "manifest's own <manifest>.d (repeatable)")
      ->allow_extra_args(false)
      ->check(kjit::tools::not_empty)
      ->check(CLI::ExistingDirectory);  // a mistyped one would leave its headers "in no bundle"
  app.add_option("-j,--jobs", o.jobs, "parallel compiles (default: the number of CPUs)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--sm-count", o.sm_count,
                 "SMs of the target devices, for every -a arch without its own ':N' (default: "
                 "the local GPU's when it is the target, else 132 as on H100/H200 SXM)")
      ->check(CLI::Range(1, kjit::tools::kMaxSmCount));
}

// How much to compile, and what to do instead of compiling.
void add_modes(CLI::App& app, Options& o) {
  app.add_flag(
      "--all-candidates", o.all_candidates,
      "also compile every autotune candidate (so KJIT_AUTOTUNE=1 compiles nothing either)");
  app.add_flag("--unaligned", o.unaligned,
               "also compile the variants for pointers that are not 16-byte aligned (default: "
               "16-byte aligned pointers only, which is what cudaMalloc/torch give)");
  app.add_flag("--json", o.json_out, "print one JSON summary object on stdout, nothing else");
  app.add_flag("-q,--quiet", o.quiet, "no per-kernel lines, only errors and the summary");
  app.add_flag("-n,--dry-run", o.dry_run,
               "list the kernels and whether the cache has them; compile nothing");
  app.add_flag("--remote", o.remote,
               "also store every kernel, signed, on the remote tier (KJIT_REMOTE_CACHE, "
               "KJIT_REMOTE_CACHE_KEY): fills a fleet's cache; a kernel not stored there fails");
  app.add_flag("--print-manifest", o.print_manifest,
               "print the problems that would be precompiled (as a manifest) and exit");
  app.add_flag("--list-ops", o.list_ops, "print the ops a manifest may name and exit");
}

// -a sm_90,sm_90: one target, and one entry in --print-manifest's "archs".
std::vector<std::string> distinct_archs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : kjit::tools::split_commas(args))
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

struct Problems {
  std::vector<ProblemEntry> entries;
  std::vector<std::string> manifest_archs;
  std::vector<EntryFailure> failures;
  size_t bad_problem_args = 0;  // --problem values that did not parse (not in `entries`)
  size_t reported = 0;          // failures already printed
};

void report(const EntryFailure& f) {
  const std::string field = f.field.empty() ? "" : ": field '" + f.field + "'";
  std::fprintf(stderr, "kjit-precompile: error: %s: %s\n", printable(f.entry + field).c_str(),
               printable(f.message).c_str());
}

void report_new(Problems& ps) {
  for (; ps.reported < ps.failures.size(); ++ps.reported) report(ps.failures[ps.reported]);
}

// The manifests' problems (or the default manifest's) and archs. Throws ManifestError.
void load_manifests(const Options& o, Problems* ps) {
  std::vector<kjit::tools::Manifest> ms;
  for (const auto& path : o.manifests) ms.push_back(kjit::tools::load_manifest_file(path));
  if (o.manifests.empty() && o.problem_args.empty()) ms.push_back(kjit::tools::default_manifest());
  for (auto& m : ms) {
    ps->entries.insert(ps->entries.end(), m.problems.begin(), m.problems.end());
    for (const auto& a : m.archs)
      if (std::find(ps->manifest_archs.begin(), ps->manifest_archs.end(), a) ==
          ps->manifest_archs.end())
        ps->manifest_archs.push_back(a);
  }
}

// The --problem values; one that does not parse fails alone.
void load_problem_args(const Options& o, Problems* ps) {
  for (size_t i = 0; i < o.problem_args.size(); ++i) {
    ProblemEntry pe{"--problem", i, json(), 0, ""};
    try {
      pe.problem = kjit::tools::parse_problem_arg(o.problem_args[i]);
    } catch (const EntryError& e) {
      ps->failures.push_back({pe.name(), i, pe.source, e.field(), e.what()});
      ++ps->bad_problem_args;
      continue;
    } catch (const std::exception& e) {  // not expected: a bad value must fail this problem alone
      ps->failures.push_back({pe.name(), i, pe.source, "", e.what()});
      ++ps->bad_problem_args;
      continue;
    }
    ps->entries.push_back(std::move(pe));
  }
}

// -a (else the manifests' archs, else the current device or sm_90), --sm-count applied to those
// without their own ':N'. Throws kjit::Error for a bad arch.
std::vector<Target> targets_of(const Options& o, const Problems& ps, std::string* note) {
  std::vector<Target> targets;
  for (const auto& a : !o.arch_args.empty() ? o.arch_args : ps.manifest_archs) {
    Target t = kjit::tools::parse_target(a);
    if (o.sm_count > 0 && a.find(':') == std::string::npos) t.sm_count = o.sm_count;
    if (std::none_of(targets.begin(), targets.end(), [&](const Target& other) {
          return other.arch == t.arch && other.sm_count == t.sm_count;
        }))
      targets.push_back(t);
  }
  if (targets.empty()) {
    targets.push_back(default_target(note));
    if (o.sm_count > 0) targets.back().sm_count = o.sm_count;
  }
  return targets;
}

// The distinct (specialization, arch, compiler) jobs, each with the entries that need it.
class JobList {
 public:
  void add(kjit::Spec s, const Target& t, kjit::Compiler* c, const ProblemEntry& pe) {
    const std::string id = t.arch + "|" + std::to_string(reinterpret_cast<uintptr_t>(c)) + "|" +
                           s.header() + "|" + s.instantiation();
    auto [it, fresh] = index_.emplace(id, jobs.size());
    if (fresh) jobs.emplace_back(std::move(s), t, c);
    Job& j = jobs[it->second];
    if (j.entry_set.insert(pe.name()).second) j.entries.push_back(pe.name());
  }
  std::vector<Job> jobs;

 private:
  std::map<std::string, size_t> index_;
};

// Where the jobs' kernels come from: the shared compiler for op problems, and for kernel entries
// the compilers that hold their recorded headers.
struct Compilers {
  Compilers(const Options& o, kjit::cache::Mode mode)
      : main(kjit::tools::cache_options(o.cache_dir, mode)),
        headers(bundles_of(o), o.templates_dir),
        kernels(main, [&o, mode] {
          return std::make_unique<kjit::Compiler>(kjit::tools::cache_options(o.cache_dir, mode));
        }) {}
  // --bundle folders and each manifest file's own, <path>.d
  static std::vector<std::string> bundles_of(const Options& o) {
    std::vector<std::string> b = o.bundle_args;
    for (const auto& path : o.manifests)
      if (path != "-") b.push_back(path + ".d");
    return b;
  }
  kjit::Compiler main;
  kjit::tools::HeaderSource headers;
  kjit::tools::KernelCompilers kernels;
};

// Jobs of every entry in manifest order, op problems first, then kernel entries (whose closures
// are checked once every kernel entry is placed: a header registered for a later entry may be
// one that an earlier entry's header includes). Returns the problems whose entries gave no
// failure; failures go to ps.
std::vector<const json*> plan_jobs(const Options& o, const std::vector<Target>& targets,
                                   Compilers& cs, Problems& ps, JobList* jobs) {
  struct Placed {
    const ProblemEntry* pe;
    kjit::tools::KernelEntry entry;
    kjit::Compiler* compiler;
  };
  std::vector<Placed> kernels;
  std::vector<const json*> passed;
  auto fail = [&](const ProblemEntry& pe, const std::string& field, const char* what) {
    ps.failures.push_back({pe.name(), pe.index, pe.source, field, what});
  };
  for (const auto& pe : ps.entries) {
    try {
      if (!pe.error.empty()) throw EntryError("", pe.error);
      if (kjit::tools::is_kernel_entry(pe.problem)) {
        kjit::tools::KernelEntry e = kjit::tools::parse_kernel_entry(pe.problem);
        kjit::Compiler& c = cs.kernels.place(e, cs.headers);
        kernels.push_back(Placed{&pe, std::move(e), &c});
        continue;
      }
      for (const Target& t : targets) {
        kjit::tools::OpContext ctx;
        ctx.target = t;
        ctx.unaligned = o.unaligned;
        ctx.all_candidates = o.all_candidates;
        kjit::tools::OpSpecs os = kjit::tools::problem_specs(pe.problem, ctx);
        for (kjit::Spec& s : os.specs) jobs->add(std::move(s), t, &cs.main, pe);
      }
      passed.push_back(&pe.problem);
    } catch (const EntryError& e) {
      // Fields are checked before the target matters: one error per entry, whatever the archs.
      fail(pe, e.field(), e.what());
    } catch (const std::exception& e) {
      fail(pe, "", e.what());
    }
  }
  for (Placed& k : kernels) {
    try {
      kjit::tools::KernelCompilers::check_closure(*k.compiler, k.entry);
      for (const Target& t : targets) jobs->add(k.entry.spec, t, k.compiler, *k.pe);
      passed.push_back(&k.pe->problem);
    } catch (const EntryError& e) {
      fail(*k.pe, e.field(), e.what());
    } catch (const std::exception& e) {
      fail(*k.pe, "", e.what());
    }
  }
  return passed;
}

// --print-manifest: the entries that passed the checks (the bad ones are reported).
int print_manifest(const Options& o, const Problems& ps, const std::vector<const json*>& passed) {
  json m;
  m["problems"] = json::array();
  for (const json* problem : passed) m["problems"].push_back(*problem);
  if (!ps.manifest_archs.empty() || !o.arch_args.empty())
    m["archs"] = o.arch_args.empty() ? ps.manifest_archs : o.arch_args;
  std::printf("%s\n", kjit::tools::json_text(m).c_str());
  return ps.failures.empty() ? 0 : 1;
}

// Why the cache cannot take this run (printed), as the exit code; nothing when it can.
std::optional<int> cache_problem(const Options& o, kjit::Compiler& compiler) {
  kjit::cache::DiskCache& disk = compiler.disk_cache();
  if (const std::string refused = kjit::tools::refused_text("kjit-precompile", disk);
      !refused.empty()) {
    std::fprintf(stderr, "%s\n", printable(refused).c_str());
    return 1;
  }
  if (!o.dry_run && disk.mode() != kjit::cache::Mode::ReadWrite) {
    std::fprintf(stderr, "%s\n",
                 printable(kjit::tools::not_writable_text("kjit-precompile", disk)).c_str());
    return 2;
  }
  if (o.remote && !disk.remote()) {
    std::fprintf(
        stderr,
        "kjit-precompile --remote: no remote tier: set KJIT_REMOTE_CACHE=redis://host:port "
        "and KJIT_REMOTE_CACHE_KEY or KJIT_REMOTE_CACHE_KEY_FILE\n");
    return 2;
  }
  return std::nullopt;
}

std::string arch_list(const std::vector<Target>& targets) {
  std::string out;
  for (const auto& t : targets) out += (out.empty() ? "" : ",") + t.arch;
  return out;
}

// --dry-run: each kernel and whether the cache has it.
int dry_run(const Options& o, const std::vector<Target>& targets, kjit::Compiler& compiler,
            std::vector<Job>& jobs, const Problems& ps) {
  size_t present = 0;
  json out = json::array();
  for (Job& j : jobs) {
    const kjit::cache::Key key = j.compiler->key(j.spec, j.target.arch);
    const bool have = j.compiler->disk_cache().get(key).has_value();
    present += have;
    if (o.json_out) {
      out.push_back({{"instantiation", j.spec.instantiation()},
                     {"header", j.spec.header()},
                     {"arch", j.target.arch},
                     {"key", key.hex()},
                     {"cached", have},
                     {"entries", j.entries}});
    } else {
      std::printf("%-7s %-8s %s\n", have ? "cached" : "missing", printable(j.target.arch).c_str(),
                  printable(j.spec.instantiation()).c_str());
    }
  }
  if (o.json_out)
    std::printf("%s\n", kjit::tools::json_text(json{{"kernels", out},
                                                    {"total", jobs.size()},
                                                    {"cached", present},
                                                    {"missing", jobs.size() - present},
                                                    {"bad_entries", ps.failures.size()}})
                            .c_str());
  else
    std::printf("%zu kernels for %s: %zu cached, %zu missing (dry run, %s)\n", jobs.size(),
                printable(arch_list(targets)).c_str(), present, jobs.size() - present,
                printable(compiler.disk_cache().dir()).c_str());
  return ps.failures.empty() ? 0 : 1;
}

// Every job, by `threads` workers taking the next one in turn. Returns the seconds taken.
double compile_all(std::vector<Job>& jobs, unsigned threads, Reporter& reporter) {
  const auto t0 = Clock::now();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      compile_job(jobs[i]);
      reporter.done(jobs[i]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  reporter.finish();
  return seconds_since(t0);
}

// What a run did, for the summary.
struct Totals {
  size_t compiled = 0, cached = 0, failed_kernels = 0, failed = 0;
  double seconds = 0, nvrtc_ms = 0, rate = 0;
  unsigned threads = 0;
};

json json_errors(const std::vector<Job>& jobs, const Problems& ps) {
  json errors = json::array();
  for (const auto& f : ps.failures)
    errors.push_back({{"entry", f.entry},
                      {"source", f.source},
                      {"index", f.index},
                      {"field", f.field},
                      {"message", f.message}});
  for (const Job& j : jobs)
    if (j.status == Status::Failed)
      errors.push_back({{"entry", j.entries[0]},
                        {"arch", j.target.arch},
                        {"instantiation", j.spec.instantiation()},
                        {"message", j.error}});
  return errors;
}

json json_kernels(const std::vector<Job>& jobs) {
  json kernels = json::array();
  for (const Job& j : jobs) {
    json k = {{"instantiation", j.spec.instantiation()},
              {"header", j.spec.header()},
              {"arch", j.target.arch},
              {"status", status_name(j.status)},
              {"ms", j.ms},
              {"bytes", j.bytes},
              {"key", j.key_hex},
              {"entries", j.entries}};
    if (j.status == Status::Failed) k["error"] = j.error;
    kernels.push_back(std::move(k));
  }
  return kernels;
}

void print_json_summary(const Totals& n, const std::vector<Job>& jobs, const Problems& ps,
                        const std::vector<Target>& targets, kjit::Compiler& compiler) {
  json out;
  out["compiled"] = n.compiled;
  out["cached"] = n.cached;
  out["failed"] = n.failed;
  out["failed_kernels"] = n.failed_kernels;
  out["bad_entries"] = ps.failures.size();
  out["total"] = jobs.size();
  out["problems"] = ps.entries.size() + ps.bad_problem_args;
  out["seconds"] = n.seconds;
  out["kernels_per_second"] = n.rate;
  out["nvrtc_ms"] = n.nvrtc_ms;
  out["jobs"] = n.threads;
  out["archs"] = json::array();
  for (const auto& t : targets) out["archs"].push_back(t.arch);
  out["cache_dir"] = compiler.disk_cache().dir();
  if (compiler.disk_cache().remote()) out["remote"] = compiler.disk_cache().remote()->where();
  out["nvrtc_version"] = kjit::Compiler::nvrtc_version();
  out["errors"] = json_errors(jobs, ps);
  out["kernels"] = json_kernels(jobs);
  std::printf("%s\n", kjit::tools::json_text(out).c_str());
}

void print_text_summary(const Options& o, const Totals& n, const Problems& ps,
                        kjit::Compiler& compiler) {
  std::printf("kjit-precompile: %zu compiled, %zu cached, %zu failed in %.2f s (%.1f kernels/s",
              n.compiled, n.cached, n.failed, n.seconds, n.rate);
  if (o.remote)
    std::printf("; every kernel not failed is on %s",
                printable(compiler.disk_cache().remote()->where()).c_str());
  if (!ps.failures.empty()) std::printf("; %zu bad manifest entries", ps.failures.size());
  std::printf(")\n");
}

// Compiles the jobs and prints the summary; the exit code.
int compile_and_report(const Options& o, const std::vector<Target>& targets,
                       const std::string& target_note, kjit::Compiler& compiler,
                       std::vector<Job>& jobs, const Problems& ps) {
  for (Job& j : jobs) j.remote = o.remote;
  if (!o.json_out && !o.quiet)
    std::printf("kjit-precompile: %zu problem(s), %zu kernel(s) for %s%s%s%s into %s (-j%u)\n",
                ps.entries.size(), jobs.size(), printable(arch_list(targets)).c_str(),
                target_note.empty() ? "" : " (", printable(target_note).c_str(),
                target_note.empty() ? "" : ")", printable(compiler.disk_cache().dir()).c_str(),
                o.jobs);
  std::fflush(stdout);
  Reporter reporter(jobs.size(), o.json_out, o.quiet);
  Totals n;
  n.threads = static_cast<unsigned>(std::min<size_t>(o.jobs, jobs.size()));
  n.seconds = compile_all(jobs, n.threads, reporter);
  n.compiled = reporter.compiled();
  n.cached = reporter.cached();
  n.failed_kernels = reporter.failed();
  n.failed = n.failed_kernels + ps.failures.size();
  n.nvrtc_ms = compiler.stats().nvrtc_ms;  // the kernel entries' compilers' too
  std::set<kjit::Compiler*> others;
  for (const Job& j : jobs)
    if (j.compiler != &compiler && others.insert(j.compiler).second)
      n.nvrtc_ms += j.compiler->stats().nvrtc_ms;
  n.rate = n.seconds > 0 ? static_cast<double>(n.compiled) / n.seconds : 0.0;
  if (o.json_out) {
    print_json_summary(n, jobs, ps, targets, compiler);
  } else {
    print_text_summary(o, n, ps, compiler);
  }
  return n.failed == 0 ? 0 : 1;
}

int run(int argc, char** argv) {
  CLI::App app{
      "kjit-precompile: compile the kernels of a list of problems into the kjit disk cache, "
      "ahead of time and without a GPU.\nWith no manifest and no --problem, the embedded default "
      "manifest (the seed workloads) is used."};
  Options o;
  add_inputs(app, o);
  add_modes(app, o);
  if (const auto rc = kjit::tools::parse_args(app, argc, argv)) return *rc;
  o.arch_args = distinct_archs(o.arch_args);
  if (o.list_ops) {
    for (const std::string& name : kjit::op::registered_ops()) std::printf("%s\n", name.c_str());
    return 0;
  }
  Problems ps;
  try {
    load_manifests(o, &ps);
  } catch (const kjit::tools::ManifestError& e) {
    std::fprintf(stderr, "kjit-precompile: %s\n", printable(e.what()).c_str());
    return 2;
  }
  load_problem_args(o, &ps);
  report_new(ps);
  std::vector<Target> targets;
  std::string target_note;
  try {
    targets = targets_of(o, ps, &target_note);
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-precompile: %s\n", printable(e.what()).c_str());
    return 2;
  }
  // The cache is made here: kernel entries register their headers in its compilers.
  Compilers cs(o, o.dry_run ? kjit::cache::Mode::ReadOnly : kjit::cache::Mode::ReadWrite);
  JobList jobs;
  const std::vector<const json*> passed = plan_jobs(o, targets, cs, ps, &jobs);
  report_new(ps);
  if (o.print_manifest) return print_manifest(o, ps, passed);
  if (const auto rc = cache_problem(o, cs.main)) return *rc;
  if (o.dry_run) return dry_run(o, targets, cs.main, jobs.jobs, ps);
  return compile_and_report(o, targets, target_note, cs.main, jobs.jobs, ps);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return kjit::tools::finish_output("kjit-precompile", run(argc, argv));
  } catch (const std::exception& e) {  // not expected: entry and compile errors are handled
    std::fprintf(stderr, "kjit-precompile: %s\n", printable(e.what()).c_str());
    return 2;
  }
}
