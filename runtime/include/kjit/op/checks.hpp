// Op support: the checks every op makes before it enqueues anything, with errors that name the
// op, the field, the value and the rule (kjit::Error::field() carries the field).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <limits>
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

// Values that keep the rules above for certain, tested inline: a passing call (the hot path)
// makes no call and builds no string. Anything else goes to the *_problem functions, which decide.
inline bool clearly_ok_pointer(const void* ptr, size_t elem_bytes) {
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  const bool pow2 = (elem_bytes & (elem_bytes - 1)) == 0;  // no division for 1, 2, 4, 8, ...
  return ptr && pow2 && (elem_bytes == 0 || (at & (elem_bytes - 1)) == 0);
}
inline bool clearly_ok_eps(float eps) {
  return eps >= 0.f && eps <= std::numeric_limits<float>::max();  // NaN fails both
}
inline bool clearly_disjoint(const void* a, size_t bytes_a, const void* b, size_t bytes_b) {
  const auto as = reinterpret_cast<uintptr_t>(a), bs = reinterpret_cast<uintptr_t>(b);
  return bytes_a <= UINTPTR_MAX - as && bytes_b <= UINTPTR_MAX - bs &&
         (as + bytes_a <= bs || bs + bytes_b <= as);
}

// The checks, for an op's call path: `context()` (usually the problem's describe()) is called
// only when a check fails, so a passing call formats and allocates nothing.
//
// `ptr` (the operand `field`) is not null and aligned to `elem_bytes`.
template <class Context>
void check_pointer(const char* op, const char* field, const void* ptr, size_t elem_bytes,
                   const Context& context) {
  if (clearly_ok_pointer(ptr, elem_bytes)) return;
  if (std::string rule = pointer_problem(field, ptr, elem_bytes); !rule.empty())
    invalid(op, field, rule, context());
}
// eps (field "eps") is finite and >= 0.
template <class Context>
void check_eps(const char* op, float eps, const Context& context) {
  if (clearly_ok_eps(eps)) return;
  if (std::string rule = eps_problem(eps); !rule.empty()) invalid(op, "eps", rule, context());
}
// Two operands of `bytes_a` and `bytes_b` bytes are the same tensor (a == b, when `same_ok`) or
// do not overlap at all; `field_b` is the one named.
template <class Context>
void check_disjoint(const char* op, const char* field_a, const void* a, size_t bytes_a,
                    const char* field_b, const void* b, size_t bytes_b, bool same_ok,
                    const Context& context) {
  if (clearly_disjoint(a, bytes_a, b, bytes_b)) return;
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
