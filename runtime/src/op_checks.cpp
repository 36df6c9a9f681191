#include <cmath>
#include <cstdint>
#include <tuple>

#include "cuda_driver.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/runtime.hpp"

namespace kjit::op {

void invalid(const std::string& op, const std::string& field, const std::string& rule,
             const std::string& context) {
  throw Error::invalid(field, op + ": " + rule + (context.empty() ? "" : " (" + context + ")"));
}

std::string pointer_problem(const char* field, const void* ptr, size_t elem_bytes) {
  if (!ptr) return std::string(field) + " is null";
  if (elem_bytes > 1 && reinterpret_cast<uintptr_t>(ptr) % elem_bytes != 0)
    return std::string(field) + " is not aligned to its element size (" +
           std::to_string(elem_bytes) + " bytes)";
  return {};
}

std::string eps_problem(float eps) {
  if (eps >= 0.f && !std::isinf(eps)) return {};
  return "eps = " + std::to_string(eps) + " must be finite and >= 0";
}

std::string overlap_problem(const char* field_a, const void* a, size_t bytes_a, const char* field_b,
                            const void* b, size_t bytes_b, bool same_ok) {
  // In 128 bits: no allocation ends past 2^64, and a range that would must not wrap around to
  // look disjoint (a hand-made pointer).
  using Wide = unsigned __int128;
  const auto as = Wide{reinterpret_cast<uintptr_t>(a)}, bs = Wide{reinterpret_cast<uintptr_t>(b)};
  const Wide top = Wide{1} << 64;
  for (const auto& [field, at, bytes] : {std::tuple{field_a, as, bytes_a}, {field_b, bs, bytes_b}})
    if (at + bytes > top)
      return std::string(field) + " (" + std::to_string(bytes) +
             " bytes) ends past the top of the address space";
  if ((same_ok && as == bs) || !(as < bs + bytes_b && bs < as + bytes_a)) return {};
  return std::string(field_a) + " and " + field_b +
         (same_ok ? " overlap without being the same tensor" : " overlap");
}

bool capturing(const Runtime& rt, CUstream stream) {
  return kjit::detail::capturing(rt.context(), stream);
}

void capture_error(const std::string& op, const std::string& what, const std::string& context,
                   const std::string& hint) {
  throw Error(Errc::CaptureCompile,
              op + ": " + what + " for " + context +
                  " while the stream is being captured into a graph: " + hint);
}

}  // namespace kjit::op
