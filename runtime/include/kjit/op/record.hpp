// Op support: the recording hook (KJIT_RECORD, kjit/record.hpp). An op calls record_problem once
// per plan build, inside PlanTable::find_or_build's build function, never per launch:
//
//   return *table.find_or_build(key, [&] {
//     const op::ProblemScope rec = op::record_problem(rt, [&] { return my_problem_json(p); });
//     ...  // build the plan: the kernels it loads are the op's, not recorded one by one
//   });
//
// The problem is the op's manifest object ({"op": "<registered name>", <fields>}), from which
// kjit-precompile derives the specs for every arch through the op's registered specs_for.
#pragma once

#include <functional>
#include <string>

namespace kjit {
class Runtime;
}

namespace kjit::op {

// While it lives, kernels this thread loads belong to the recorded problem (Recorder::in_op_build).
class [[nodiscard]] ProblemScope {
 public:
  explicit ProblemScope(bool active);
  ~ProblemScope();
  ProblemScope(const ProblemScope&) = delete;
  ProblemScope& operator=(const ProblemScope&) = delete;

 private:
  bool active_;
};

// Whether rt records (its compiler has a Recorder): one pointer load.
bool recording(Runtime& rt);

// When rt records: appends problem_json() (called only then) to the recording, once per distinct
// problem, and returns an active scope. A plan for pointers that are not 16-byte aligned
// (`aligned` false) or an autotuned one (`autotune`) adds "aligned": false or "autotune": true,
// which kjit-precompile reads as that entry's --unaligned or --all-candidates. An empty text (a
// problem the op cannot state as a manifest object) records nothing and leaves the op's kernels
// to be recorded as kernel entries. A recording that cannot be written never fails the op
// (Recorder counts and prints it).
ProblemScope record_problem(Runtime& rt, const std::function<std::string()>& problem_json,
                            bool aligned = true, bool autotune = false);

}  // namespace kjit::op
