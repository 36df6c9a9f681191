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

// `ptr` (the operand `field`) is not null and aligned to `elem_bytes`.
void check_pointer(const std::string& op, const std::string& field, const void* ptr,
                   size_t elem_bytes, const std::string& context);
// eps (field "eps") is finite and >= 0.
void check_eps(const std::string& op, float eps, const std::string& context);
// Two operands of `bytes_a` and `bytes_b` bytes are the same tensor (a == b, when `same_ok`) or do
// not overlap at all; `field_b` is the one named.
void check_disjoint(const std::string& op, const std::string& field_a, const void* a,
                    size_t bytes_a, const std::string& field_b, const void* b, size_t bytes_b,
                    bool same_ok, const std::string& context);

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
