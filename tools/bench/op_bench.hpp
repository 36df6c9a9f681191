// kjit-bench's generic case: any op of the registry (kjit/op/registry.hpp), by its problem.
#pragma once

#include <nlohmann/json.hpp>

#include "cases.hpp"
#include "kjit/op/harness.hpp"
#include "kjit/op/registry.hpp"

namespace kjit_bench {

// The row: problem, config, correct (+ checked, max_abs_err, first_wrong), device_us (median,
// min, max), gbps (of the op's min_bytes), host_us.
nlohmann::json run_problem(kjit::Runtime& rt, CUstream stream, const kjit::op::OpProblem& p,
                           const Settings& s);
// The same on buffers made for p's operands (a sweep times every config on one set of buffers).
nlohmann::json run_problem(kjit::Runtime& rt, CUstream stream, const kjit::op::OpProblem& p,
                           const Settings& s, kjit::op::ProblemBuffers& b);
// Every candidate of p on this device (OpProblem::candidates) whose config contains
// s.sweep_filter, each checked and timed on one set of buffers (no host time); one that fails to
// build or run is a row with its config and "error". Throws InvalidArgument when p's op lists no
// candidates.
std::vector<nlohmann::json> sweep_problem(kjit::Runtime& rt, CUstream stream,
                                          const kjit::op::OpProblem& p, const Settings& s);
inline constexpr const char* kNoCandidates =
    "nothing to sweep: its op lists no autotune candidates for it (an empty problem has none; an "
    "op lists them through OpProblem::candidates)";

}  // namespace kjit_bench
