// The op registry and the typed reading of a problem's fields (kjit/op/registry.hpp).
#include "kjit/op/registry.hpp"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <shared_mutex>

#include "kjit/error.hpp"

namespace kjit::op {
namespace {

using Kind = FieldValue::Kind;

struct Registry {
  std::shared_mutex mu;
  std::map<std::string, std::shared_ptr<const OpInfo>> ops;
  Registry() {
    for (const OpInfo& op : builtin_ops()) ops.emplace(op.name, std::make_shared<OpInfo>(op));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Fields::Fields(std::string op, std::map<std::string, FieldValue> values)
    : op_(std::move(op)), values_(std::move(values)) {}

void Fields::bad(const std::string& name, const std::string& rule) const {
  throw Error::invalid(name, rule);
}

void Fields::only(std::initializer_list<const char*> known) const {
  std::set<std::string> names(known.begin(), known.end());
  names.insert("op");
  for (const auto& [name, value] : values_)
    if (!names.count(name))
      bad(name, "unknown field for op " + op_ + " (known: " + joined(names) + ")");
}

const FieldValue& Fields::require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) bad(name, "missing (op " + op_ + " needs it)");
  if (!it->second.problem.empty()) bad(name, it->second.problem);
  return it->second;
}

int64_t Fields::integer(const std::string& name) const {
  const FieldValue& v = require(name);
  if (v.kind != Kind::Integer) bad(name, "must be an integer, got " + v.shown);
  return v.integer;
}

int64_t Fields::integer(const std::string& name, int64_t fallback) const {
  return has(name) ? integer(name) : fallback;
}

std::vector<int64_t> Fields::integers(const std::string& name) const {
  const FieldValue& v = require(name);
  if (!v.element_problem.empty()) bad(name, v.element_problem);
  if (v.kind != Kind::Integers) bad(name, "must be an array of integers, got " + v.shown);
  return v.integers;
}

std::string Fields::text(const std::string& name, const std::string& fallback) const {
  if (!has(name)) return fallback;
  const FieldValue& v = require(name);
  if (v.kind != Kind::Text) bad(name, "must be a string, got " + v.shown);
  return v.text;
}

bool Fields::flag(const std::string& name, bool fallback) const {
  if (!has(name)) return fallback;
  const FieldValue& v = require(name);
  if (v.kind != Kind::Bool) bad(name, "must be true or false, got " + v.shown);
  return v.flag;
}

DType Fields::dtype(const std::string& name, DType fallback) const {
  std::string s = text(name, dtype_name(fallback));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  try {
    return parse_dtype(s);
  } catch (const Error& e) {
    bad(name, e.what());
  }
}

double OpProblem::min_bytes() const {
  double bytes = 0;
  for (const Operand& o : operands())
    bytes += static_cast<double>(o.elements) * static_cast<double>(dtype_size(o.dtype));
  return bytes;
}

std::vector<Candidate> OpProblem::candidates(const Target&) const {
  return {};
}

void register_op(OpInfo op) {
  if (op.name.empty()) throw Error::invalid("name", "register_op: an op needs a name");
  if (!op.parse) throw Error::invalid("parse", "register_op: op " + op.name + " has no parser");
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  if (r.ops.count(op.name))
    throw Error::invalid("name", "register_op: op " + op.name + " is already registered");
  const std::string name = op.name;
  r.ops.emplace(name, std::make_shared<OpInfo>(std::move(op)));
}

const OpInfo& find_op(const std::string& name) {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  auto it = r.ops.find(name);
  if (it == r.ops.end()) {
    std::set<std::string> known;
    for (const auto& [n, op] : r.ops) known.insert(n);
    throw Error(Errc::NotFound, "unknown op '" + name + "' (known: " + joined(known) + ")");
  }
  return *it->second;  // entries are never removed: the reference stays valid
}

std::vector<std::string> registered_ops() {
  Registry& r = registry();
  std::shared_lock lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [n, op] : r.ops) out.push_back(n);
  return out;
}

}  // namespace kjit::op
