#include "op_fields.hpp"

#include <cmath>
#include <cstdint>

#include "tool_util.hpp"

namespace kjit::tools {
namespace {

using Kind = op::FieldValue::Kind;
using nlohmann::json;

// An integer that fits int64_t. One past it (2^64-1, 1e20) is out of range rather than "not an
// integer"; 2.5, 4.0 and "8" are not integers (4.0 is read as a float, which could hide 30.9).
bool too_big(const json& v) {
  return v.is_number_unsigned() ? v.get<uint64_t>() > INT64_MAX
         : v.is_number_float()  ? std::fabs(v.get<double>()) >= 0x1p63
                                : false;
}

op::FieldValue value_of(const json& v) {
  op::FieldValue f;
  f.shown = shown(v);
  if (auto mark = json_mark(v)) {
    f.problem = *mark;
  } else if (too_big(v)) {
    f.problem = f.shown + " is out of range (an integer here is at most 2^63-1)";
  } else if (v.is_number_integer()) {
    f.kind = Kind::Integer;
    f.integer = v.get<int64_t>();
  } else if (v.is_number_float()) {
    f.kind = Kind::Number;
    f.number = v.get<double>();
  } else if (v.is_boolean()) {
    f.kind = Kind::Bool;
    f.flag = v.get<bool>();
  } else if (v.is_string()) {
    f.kind = Kind::Text;
    f.text = v.get<std::string>();
  } else if (v.is_array()) {
    f.kind = Kind::Integers;
    for (const json& e : v) {
      const op::FieldValue d = value_of(e);
      f.element_problem = d.problem.empty() && d.kind != Kind::Integer
                              ? "must be an integer, got " + d.shown
                              : d.problem;
      if (!f.element_problem.empty()) {
        f.kind = Kind::Other;
        f.integers.clear();
        break;
      }
      f.integers.push_back(d.integer);
    }
  }
  return f;
}

}  // namespace

op::Fields op_fields(const json& problem, const std::string& op) {
  std::map<std::string, op::FieldValue> values;
  for (auto it = problem.begin(); it != problem.end(); ++it)
    if (it.key() != "op") values.emplace(it.key(), value_of(it.value()));
  return op::Fields(op, std::move(values));
}

}  // namespace kjit::tools
