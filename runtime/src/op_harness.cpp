// Running a registered op's problem and checking it (kjit/op/harness.hpp).
#include "kjit/op/harness.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kjit/error.hpp"
#include "kjit/host_math.hpp"

namespace kjit::op {
namespace {

size_t bytes_of(const Operand& o) {
  return static_cast<size_t>(o.elements) * dtype_size(o.dtype);
}

bool matches(float out, double want, double atol, double rtol) {
  if (std::isnan(want)) return std::isnan(out);
  if (!std::isfinite(want) || !std::isfinite(out)) return static_cast<double>(out) == want;
  return std::fabs(out - want) <= atol + rtol * std::fabs(want);
}

}  // namespace

ProblemBuffers::ProblemBuffers(Runtime& rt, const OpProblem& p, int sets, uint64_t seed)
    : operands_(p.operands()) {
  if (sets < 1)
    throw Error::invalid("sets", "ProblemBuffers: sets >= 1, got " + std::to_string(sets));
  std::vector<std::vector<unsigned char>> bytes;
  for (size_t i = 0; i < operands_.size(); ++i) {
    const Operand& o = operands_[i];
    if (o.elements < 0)
      throw Error::invalid(o.name, p.describe() + ": operand " + o.name + " has " +
                                       std::to_string(o.elements) + " elements");
    inputs_.push_back(o.output ? std::vector<float>{}
                               : host::random_normal(o.dtype, static_cast<size_t>(o.elements),
                                                     o.mean, o.sd, seed + i));
    bytes.push_back(host::to_bytes(o.dtype, inputs_.back()));
  }
  for (int s = 0; s < sets; ++s) {
    std::vector<void*> ptrs;
    for (size_t i = 0; i < operands_.size(); ++i) {
      // At least one byte, so that an empty operand still has a distinct, valid pointer.
      buffers_.emplace_back(rt, std::max<size_t>(bytes_of(operands_[i]), 1));
      if (!operands_[i].output && !bytes[i].empty())
        buffers_.back().upload(bytes[i].data(), bytes[i].size());
      ptrs.push_back(reinterpret_cast<void*>(buffers_.back().ptr()));
    }
    ptrs_.push_back(std::move(ptrs));
    poison_outputs(s);
  }
}

std::vector<float> ProblemBuffers::read(int set, size_t i) const {
  const DeviceBuffer& b = buffers_.at(static_cast<size_t>(set) * operands_.size() + i);
  return host::from_bytes(operands_.at(i).dtype,
                          b.to_host<unsigned char>(bytes_of(operands_.at(i))));
}

void ProblemBuffers::poison_outputs(int set) {
  for (size_t i = 0; i < operands_.size(); ++i)
    if (operands_[i].output)
      buffers_.at(static_cast<size_t>(set) * operands_.size() + i).fill_bytes(0xFF);  // NaN
}

int ProblemBuffers::sets_for(const OpProblem& p, int64_t bytes) {
  double per_set = 0;
  for (const Operand& o : p.operands()) per_set += static_cast<double>(bytes_of(o));
  if (per_set <= 0) return 2;
  return static_cast<int>(std::clamp(std::ceil(static_cast<double>(bytes) / per_set), 2.0, 1e4));
}

CheckResult check(Runtime& rt, const OpProblem& p, ProblemBuffers& b, bool autotune,
                  CUstream stream) {
  b.poison_outputs(0);
  p.run(rt, b.ptrs(0), autotune, stream);
  Event done(rt);
  done.record(stream);
  done.synchronize();
  const std::vector<Expected> want = p.reference(b.inputs());
  CheckResult r;
  size_t k = 0;
  for (size_t i = 0; i < b.operands().size(); ++i) {
    if (!b.operands()[i].output) continue;
    if (k >= want.size())
      throw Error(Errc::InvalidArgument, p.describe() +
                                             ": the reference gives fewer outputs than "
                                             "the problem has");
    const Expected& e = want[k++];
    const std::vector<float> got = b.read(0, i);
    if (e.index.size() != e.value.size())
      throw Error(Errc::InvalidArgument, p.describe() + ": the reference of " +
                                             b.operands()[i].name +
                                             " has unequal index and value lists");
    for (int64_t idx : e.index)
      if (idx < 0 || static_cast<size_t>(idx) >= got.size())
        throw Error(Errc::InvalidArgument, p.describe() + ": the reference names " +
                                               b.operands()[i].name + "[" + std::to_string(idx) +
                                               "], outside its " + std::to_string(got.size()) +
                                               " elements");
    for (size_t j = 0; j < e.index.size(); ++j) {
      const float out = got[static_cast<size_t>(e.index[j])];
      ++r.checked;
      if (std::isfinite(out) && std::isfinite(e.value[j]))
        r.max_abs = std::max(r.max_abs, std::fabs(out - e.value[j]));
      if (matches(out, e.value[j], e.atol, e.rtol)) continue;
      if (r.wrong++ == 0) {
        std::ostringstream m;
        m << b.operands()[i].name << "[" << e.index[j] << "]: " << out << " vs " << e.value[j]
          << " (atol " << e.atol << ", rtol " << e.rtol << ")";
        r.first_wrong = m.str();
      }
    }
  }
  r.ok = r.wrong == 0;
  return r;
}

}  // namespace kjit::op
