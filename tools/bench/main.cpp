// kjit-bench: device time, host overhead and bandwidth of kjit's ops over a shape list, plus
// the JIT path's costs; JSON out. tools/bench.py runs it, measures the peers (PyTorch eager,
// torch.compile) the same way in the same process, and prints the table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cases.hpp"
#include "jit_bench.hpp"
#include "manifest.hpp"
#include "op_bench.hpp"
#include "op_fields.hpp"
#include "timing.hpp"
#include "tool_util.hpp"

namespace {

// --problem values through the op registry: a bad one fails before any device work.
struct Problem {
  std::string op;
  std::unique_ptr<kjit::op::OpProblem> p;
};

std::vector<Problem> parse_problems(const std::vector<std::string>& args) {
  std::vector<Problem> out;
  for (size_t i = 0; i < args.size(); ++i) {
    try {
      const nlohmann::json j = kjit::tools::parse_problem_arg(args[i]);
      kjit::tools::check_marks(j);  // a key given twice, a number no double holds
      const std::string op = j.value("op", "");
      out.push_back({op, kjit::op::find_op(op).parse(kjit::tools::op_fields(j, op))});
    } catch (const kjit::tools::EntryError& e) {
      throw kjit::Error::invalid(
          e.field(), "--problem[" + std::to_string(i) + "] '" + args[i] +
                         "': " + (e.field().empty() ? "" : e.field() + ": ") + e.what());
    } catch (const kjit::Error& e) {
      throw kjit::Error(e.code(), "--problem[" + std::to_string(i) + "] '" + args[i] + "': " +
                                      (e.field().empty() ? "" : e.field() + ": ") + e.what());
    }
  }
  return out;
}

bool selected(const std::vector<std::string>& only_ops, const std::string& op) {
  return only_ops.empty() || std::find(only_ops.begin(), only_ops.end(), op) != only_ops.end();
}

enum class Swept { Ok, Failed, Wrong };

// Prints one candidate's row (adding its share of the copy bandwidth). A candidate that does not
// compile or that this device cannot run is skipped, as autotuning skips it; any other error
// fails the run.
Swept report_swept(nlohmann::json& r, const std::string& what, double copy) {
  const std::string candidate = r.value("candidate", std::string());
  const std::string config = r["config"].get<std::string>();
  const std::string label =
      candidate.empty() || candidate == config ? config : candidate + " [" + config + "]";
  if (r.contains("error")) {
    const std::string errc = r.value("errc", std::string());
    const bool skipped = errc == kjit::errc_name(kjit::Errc::Compile) ||
                         errc == kjit::errc_name(kjit::Errc::Unsupported);
    std::printf("  %s: %s: %s %s: %s\n", what.c_str(), label.c_str(),
                skipped ? "skipped," : "FAILED,", errc.c_str(),
                r["error"].get<std::string>().c_str());
    std::fflush(stdout);
    return skipped ? Swept::Ok : Swept::Failed;
  }
  r["pct_copy"] = 100.0 * r["gbps"].get<double>() / copy;
  // GroupNorm's own harness reports the relative L2 error, the generic one the largest.
  const bool rel = r.contains("rel_l2");
  std::printf(
      "  %-30s %10.2f %5.1f%% %s %9.2e  %s%s%s\n", what.c_str(), r["device_us"].get<double>(),
      r["pct_copy"].get<double>(), rel ? "rel_l2" : "max_abs",
      r.value(rel ? "rel_l2" : "max_abs_err", 0.0), label.c_str(),
      r.value("correct", true) ? "" : "  WRONG: ", r.value("first_wrong", std::string()).c_str());
  std::fflush(stdout);
  return r.value("correct", true) ? Swept::Ok : Swept::Wrong;
}

struct Inputs {
  std::vector<Problem> problems;
  std::vector<kjit_bench::Case> cases;
};

// What the command line names, checked before the device is touched (so without a GPU too):
// problems, the shape list, and the results path (creating nothing: an earlier results file
// survives a failed run, and a path that cannot be written fails before minutes of work). An
// error here is reported and exits 2, as a bad option does.
std::optional<Inputs> read_inputs(const std::vector<std::string>& problem_args,
                                  const std::string& shapes_file, const std::string& json_file) {
  try {
    Inputs in;
    in.problems = parse_problems(problem_args);
    in.cases = !shapes_file.empty()   ? kjit_bench::load_cases(shapes_file)
               : problem_args.empty() ? kjit_bench::default_cases()
                                      : std::vector<kjit_bench::Case>{};
    if (!json_file.empty()) kjit::tools::check_output_path(json_file);
    return in;
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-bench: %s error: %s\n", kjit::errc_name(e.code()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit-bench: error: %s\n", e.what());
  }
  return std::nullopt;
}

struct Options {
  std::string shapes_file, json_file;
  std::vector<std::string> only_ops, problem_args;
  kjit_bench::Settings s;
  bool skip_jit = false, sweep = false;
};

// --op's check: every name is a registered op.
std::string check_ops(const std::string& value) {
  for (const std::string& op : kjit::tools::split_commas({value})) {
    try {
      kjit::op::find_op(op);
    } catch (const kjit::Error&) {
      std::string known;
      for (const std::string& name : kjit::op::registered_ops())
        known += (known.empty() ? "" : ", ") + name;
      return "op '" + kjit::tools::printable(op) + "' is not registered (registered: " + known +
             ")";
    }
  }
  return "";
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--shapes", o.shapes_file, "JSON array of {op, shape, groups, dtype, layout}")
      ->check(kjit::tools::not_empty);
  app.add_option("--json", o.json_file, "write all results to this file")
      ->check(kjit::tools::not_empty);
  // Split here, not by CLI11's delimiter, which drops empty pieces ('--op layer_norm,').
  app.add_option("--op", o.only_ops,
                 "only the cases and problems of these registered ops, comma-separated (e.g. "
                 "layer_norm,rms_norm; kjit-precompile --list-ops lists them)")
      ->check(check_ops);
  app.add_option("--replays", o.s.replays, "graph replays per case (median taken)")
      ->check(CLI::Range(5, 100000));
  app.add_flag("--autotune", o.s.autotune, "autotune each problem first");
  CLI::Option* sweep_flag =
      app.add_flag("--sweep", o.sweep,
                   "check and time every autotune candidate of each case and -p problem (device "
                   "time; an op whose problems list no candidates is refused)");
  app.add_option("--sweep-filter", o.s.sweep_filter,
                 "--sweep: only the configs whose description contains this text (e.g. 'smem')")
      ->needs(sweep_flag);
  app.add_flag(
      "--no-check", [&o](int64_t) { o.s.check = false; }, "skip the float64 check");
  app.add_flag("--skip-jit", o.skip_jit, "skip the compile/launch-overhead section");
  app.add_option("-p,--problem", o.problem_args,
                 "a problem of any registered op, as kjit-precompile takes it (JSON or short form, "
                 "e.g. 'layer_norm bf16 rows=4096 width=768'); only these are run unless --shapes "
                 "is given too")
      ->check(kjit::tools::not_empty);
}

// One run's state on the device: what it found, what it printed, how it ends.
struct Bench {
  kjit::Runtime& rt;
  kjit::Stream& stream;
  const Options& o;
  nlohmann::json out;
  double copy = 0;
  bool all_correct = true, sweep_failed = false;

  void note(Swept r) {
    all_correct &= r != Swept::Wrong;
    sweep_failed |= r == Swept::Failed;
  }
  int exit_code() const { return !all_correct ? 3 : sweep_failed ? 1 : 0; }
};

// --sweep, before minutes of other cases: a problem with nothing to sweep is refused.
bool all_sweepable(kjit::Runtime& rt, const Options& o, const std::vector<Problem>& problems) {
  for (const auto& [op, p] : problems)
    if (selected(o.only_ops, op) && p->candidates(kjit::Target::of(rt)).empty()) {
      std::fprintf(stderr, "kjit-bench: error: --sweep: %s: %s\n", p->describe().c_str(),
                   kjit_bench::kNoCandidates);
      return false;
    }
  return true;
}

// The device, the JIT costs (first: nothing compiled yet) and the copy bandwidth.
void run_preamble(Bench& b) {
  const auto& p = b.rt.props();
  b.out["device"] = {{"name", p.name},
                     {"sm_count", p.sm_count},
                     {"driver", p.driver_version},
                     {"arch", b.rt.arch()},
                     {"nvrtc", kjit::Compiler::nvrtc_version()}};
  if (!b.o.skip_jit) {
    b.out["jit"] = kjit_bench::run_jit(b.rt, b.stream);
    std::printf("jit: %s\n", b.out["jit"].dump().c_str());
  }
  b.copy = kjit_bench::copy_bandwidth_gbps(b.rt, b.stream);
  b.out["copy_gbps"] = b.copy;
  std::printf("copy bandwidth (read+write): %.0f GB/s\n", b.copy);
}

// The driver's own launch cost before the cases, then the table's header.
void print_bare_launch(Bench& b, kjit_bench::BareLaunch& bare) {
  // The driver's own host cost per launch, before and after the cases: this machine's host
  // time drifts between runs, and every op's host time includes one launch.
  b.out["host_us_bare_launch"] = nlohmann::json::array({bare.host_us(b.stream)});
  std::printf("bare cuLaunchKernel: %.2f us host\n", b.out["host_us_bare_launch"][0].get<double>());
  std::printf("%-13s %-22s %-5s %10s %9s %8s %6s %9s  %s\n", "op", "shape", "dtype", "device us",
              "host us", "GB/s", "%copy", "rel_l2", "config");
}

// Every candidate of a shape-list case; fp32x3 and fp32x3-percall are one registry problem,
// swept once.
void sweep_case(Bench& b, const kjit_bench::Case& c, std::set<std::string>& swept_cases) {
  const bool gn = c.op == "group_norm";
  const std::string what = c.op + " " + kjit_bench::shape_text(c) + " " +
                           (gn ? c.dtype : kjit_bench::registered_dtype(c)) + " " + c.layout;
  if (!swept_cases.insert(what).second) return;
  auto swept = gn ? kjit_bench::sweep_group_norm(b.rt, b.stream, c, b.o.s)
                  : kjit_bench::sweep_registered(b.rt, b.stream, c, b.o.s);
  for (auto& r : swept) {
    b.note(
        report_swept(r, r["shape"].get<std::string>() + " " + r.value("dtype", c.dtype), b.copy));
    b.out["sweep"].push_back(r);
  }
}

void run_case(Bench& b, const kjit_bench::Case& c) {
  nlohmann::json row;
  // load_cases accepted only these ops.
  if (c.op == "group_norm") {
    row = kjit_bench::run_group_norm(b.rt, b.stream, c, b.o.s);
  } else if (kjit_bench::row_norm_op(c.op)) {
    row = kjit_bench::run_layer_norm(b.rt, b.stream, c, b.o.s);
  } else {
    row = kjit_bench::run_linear_gn_min(b.rt, b.stream, c, b.o.s);
  }
  row["pct_copy"] = 100.0 * row["gbps"].get<double>() / b.copy;
  if (row.contains("correct") && !row["correct"].get<bool>()) b.all_correct = false;
  std::printf("%-13s %-22s %-5s %10.2f %9.2f %8.0f %5.1f%% %9.2e  %s%s\n", c.op.c_str(),
              row["shape"].get<std::string>().c_str(), c.dtype.c_str(),
              row["device_us"].get<double>(), row["host_us"].get<double>(),
              row["gbps"].get<double>(), row["pct_copy"].get<double>(), row.value("rel_l2", 0.0),
              row["config"].get<std::string>().c_str(),
              row.value("correct", true) ? "" : "  WRONG");
  std::fflush(stdout);
  b.out["results"].push_back(row);
}

void run_problem(Bench& b, const kjit::op::OpProblem& p) {
  if (b.o.sweep) {
    for (auto& r : kjit_bench::sweep_problem(b.rt, b.stream, p, b.o.s)) {
      b.note(report_swept(r, p.describe(), b.copy));
      b.out["sweep"].push_back(r);
    }
    return;
  }
  nlohmann::json row = kjit_bench::run_problem(b.rt, b.stream, p, b.o.s);
  row["pct_copy"] = 100.0 * row["gbps"].get<double>() / b.copy;
  if (!row.value("correct", true)) b.all_correct = false;
  std::printf("%s: %.2f us device, %.2f us host, %.0f GB/s (%.1f%% of copy), %s%s%s\n",
              p.describe().c_str(), row["device_us"].get<double>(), row["host_us"].get<double>(),
              row["gbps"].get<double>(), row["pct_copy"].get<double>(),
              row["config"].get<std::string>().c_str(),
              row.value("correct", true) ? "" : "  WRONG: ",
              row.value("first_wrong", std::string()).c_str());
  std::fflush(stdout);
  b.out["problems"].push_back(row);
}

int run_on_device(const Options& o, const Inputs& in) {
  kjit::Runtime rt;
  kjit::Stream stream(rt);
  if (o.sweep && !all_sweepable(rt, o, in.problems)) return 2;
  Bench b{rt, stream, o, {}};
  run_preamble(b);
  kjit_bench::BareLaunch bare(rt);
  print_bare_launch(b, bare);
  std::set<std::string> swept_cases;
  for (const auto& c : in.cases) {
    if (!selected(o.only_ops, c.op)) continue;
    if (o.sweep)
      sweep_case(b, c, swept_cases);
    else
      run_case(b, c);
  }
  for (const auto& [op, p] : in.problems)
    if (selected(o.only_ops, op)) run_problem(b, *p);
  b.out["host_us_bare_launch"].push_back(bare.host_us(stream));
  std::printf("bare cuLaunchKernel after the cases: %.2f us host\n",
              b.out["host_us_bare_launch"][1].get<double>());
  if (!o.json_file.empty())
    kjit::tools::write_text_file(o.json_file, kjit::tools::json_text(b.out) + "\n");
  return b.exit_code();
}

int run(int argc, char** argv) {
  CLI::App app{"kjit-bench: kjit ops on this GPU (device time by CUDA-graph replay)"};
  Options o;
  add_options(app, o);
  if (const auto rc = kjit::tools::parse_args(app, argc, argv)) return *rc;
  o.only_ops = kjit::tools::split_commas(o.only_ops);
  const std::optional<Inputs> in = read_inputs(o.problem_args, o.shapes_file, o.json_file);
  if (!in) return 2;
  try {
    return run_on_device(o, *in);
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-bench: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit-bench: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  return kjit::tools::finish_output("kjit-bench", run(argc, argv));
}
