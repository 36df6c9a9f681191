// read_param_sizes (runtime/src/param_sizes.hpp) against fake driver entry points: the count
// query where the driver has one, the probe up to CUDA_ERROR_INVALID_VALUE where it does not, and
// "cannot say" (no check) wherever the driver's answers do not add up.
#include <doctest/doctest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "../../runtime/src/param_sizes.hpp"

namespace {

std::vector<size_t> g_sizes;  // the fake kernel's parameters
int g_info_calls = 0, g_past_end = 0;
size_t g_fail_at = SIZE_MAX;  // an index whose query fails with another error
CUresult g_count_result = CUDA_SUCCESS;
size_t g_count_extra = 0;  // a count query that says more than there are

CUresult fake_info(CUfunction, size_t i, size_t* offset, size_t* size) {
  ++g_info_calls;
  if (i == g_fail_at) return CUDA_ERROR_NOT_SUPPORTED;
  if (i >= g_sizes.size()) {
    ++g_past_end;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *offset = 0;
  for (size_t k = 0; k < i; ++k) *offset += g_sizes[k];
  *size = g_sizes[i];
  return CUDA_SUCCESS;
}

CUresult fake_count(CUfunction, size_t* n) {
  if (g_count_result != CUDA_SUCCESS) return g_count_result;
  *n = g_sizes.size() + g_count_extra;
  return CUDA_SUCCESS;
}

CUresult endless_info(CUfunction, size_t, size_t* offset, size_t* size) {
  *offset = 0;
  *size = 8;
  return CUDA_SUCCESS;
}

void reset(std::vector<size_t> sizes) {
  g_sizes = std::move(sizes);
  g_info_calls = g_past_end = 0;
  g_fail_at = SIZE_MAX;
  g_count_result = CUDA_SUCCESS;
  g_count_extra = 0;
}

}  // namespace

using kjit::detail::read_param_sizes;

TEST_CASE("param sizes: a driver with a count query is asked for exactly the parameters") {
  for (const std::vector<size_t>& sizes :
       {std::vector<size_t>{}, std::vector<size_t>{8}, std::vector<size_t>{8, 8, 4, 4, 8, 2}}) {
    reset(sizes);
    const auto got = read_param_sizes(nullptr, &fake_count, &fake_info);
    REQUIRE(got.has_value());
    CHECK(*got == sizes);
    CHECK(g_info_calls == static_cast<int>(sizes.size()));
    CHECK(g_past_end == 0);  // nothing for a sanitizer to report
  }
}

TEST_CASE("param sizes: without a count query the probe stops at the driver's INVALID_VALUE") {
  reset({8, 8, 8, 4, 4});
  const auto got = read_param_sizes(nullptr, nullptr, &fake_info);
  REQUIRE(got.has_value());
  CHECK(*got == g_sizes);
  CHECK(g_past_end == 1);
  reset({});
  const auto none = read_param_sizes(nullptr, nullptr, &fake_info);
  REQUIRE(none.has_value());
  CHECK(none->empty());
}

TEST_CASE("param sizes: a failing count query falls back to the probe") {
  reset({8, 4});
  g_count_result = CUDA_ERROR_INVALID_HANDLE;
  const auto got = read_param_sizes(nullptr, &fake_count, &fake_info);
  REQUIRE(got.has_value());
  CHECK(*got == g_sizes);
  CHECK(g_past_end == 1);
}

TEST_CASE("param sizes: answers that do not add up leave the check off") {
  SUBCASE("no info query (a driver before 12.4)") {
    reset({8});
    CHECK_FALSE(read_param_sizes(nullptr, &fake_count, nullptr).has_value());
  }
  SUBCASE("the count says more than the info query knows") {
    reset({8, 8});
    g_count_extra = 1;
    CHECK_FALSE(read_param_sizes(nullptr, &fake_count, &fake_info).has_value());
  }
  SUBCASE("a count past any kernel's parameter space: probed instead") {
    reset({8, 8});
    g_count_extra = kjit::detail::kMaxKernelParams;
    const auto got = read_param_sizes(nullptr, &fake_count, &fake_info);
    REQUIRE(got.has_value());
    CHECK(*got == g_sizes);
  }
  SUBCASE("an index's query fails with another error") {
    reset({8, 8, 8});
    g_fail_at = 1;
    CHECK_FALSE(read_param_sizes(nullptr, nullptr, &fake_info).has_value());
    CHECK_FALSE(read_param_sizes(nullptr, &fake_count, &fake_info).has_value());
  }
  SUBCASE("a probe that never ends") {
    CHECK_FALSE(read_param_sizes(nullptr, nullptr, &endless_info).has_value());
  }
}
