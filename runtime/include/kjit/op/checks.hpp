// Op support: the checks every op makes before it enqueues anything, with errors that name the
// op, the field, the value and the rule (kjit::Error::field() carries the field).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "kjit/error.hpp"

namespace kjit {
class Runtime;
namespace op {

// Throws Error::invalid(field, "<op>: <rule> (<context>)"); context is usually the problem's
// describe() and may be empty.
[[noreturn]] void invalid(const std::string& op, const std::string& field, const std::string& rule,
                          const std::string& context);

// The rule a value breaks, or "" when it keeps it (an empty string: nothing allocated).
std::string pointer_problem(const char* field, const void* ptr, size_t elem_bytes);
std::string eps_problem(float eps);
std::string overlap_problem(const char* field_a, const void* a, size_t bytes_a, const char* field_b,
                            const void* b, size_t bytes_b, bool same_ok);

// The checks, for an op's call path: `context()` (usually the problem's describe()) is called
// only when a check fails, so a passing call formats and allocates nothing.
//
// `ptr` (the operand `field`) is not null and aligned to `elem_bytes`.
template <class Context>
void check_pointer(const char* op, const char* field, const void* ptr, size_t elem_bytes,
                   const Context& context) {
  if (std::string rule = pointer_problem(field, ptr, elem_bytes); !rule.empty())
    invalid(op, field, rule, context());
}
// eps (field "eps") is finite and >= 0.
template <class Context>
void check_eps(const char* op, float eps, const Context& context) {
  if (std::string rule = eps_problem(eps); !rule.empty()) invalid(op, "eps", rule, context());
}
// Two operands of `bytes_a` and `bytes_b` bytes are the same tensor (a == b, when `same_ok`) or
// do not overlap at all; `field_b` is the one named.
template <class Context>
void check_disjoint(const char* op, const char* field_a, const void* a, size_t bytes_a,
                    const char* field_b, const void* b, size_t bytes_b, bool same_ok,
                    const Context& context) {
  if (std::string rule = overlap_problem(field_a, a, bytes_a, field_b, b, bytes_b, same_ok);
      !rule.empty())
    invalid(op, field_b, rule, context());
}

// Whether `stream` is being captured into a graph (a legacy or per-thread stream whose context
// is being captured counts too). An op that would have to compile, allocate or autotune then
// throws capture_error instead: work of that kind cannot go into a graph.
bool capturing(const Runtime& rt, CUstream stream);
// Errc::CaptureCompile: "<op>: <what> for <context> while the stream is being captured into a
// graph: <hint>" (hint: what to call before capturing).
[[noreturn]] void capture_error(const std::string& op, const std::string& what,
                                const std::string& context, const std::string& hint);

}  // namespace op
}  // namespace kjit
