#include <doctest/doctest.h>

#include <type_traits>
#include <utility>

#include "kjit/kjit.hpp"
#include "test_util.hpp"

TEST_CASE("spec: ints, bools and types make the instantiation string") {
  kjit::Spec s("kjit/group_norm.cuh", "kjit::gn_fwd");
  s.type(kjit::DType::F32).value(256).value(32).value(576).value(true).value(false);
  CHECK(s.instantiation() == "kjit::gn_fwd<float, 256, 32, 576, true, false>");

  kjit::Spec h("x.cuh", "ns::k");
  h.type(kjit::DType::F16).type(kjit::DType::BF16).value(int64_t{-3}).value(int64_t{1} << 40);
  CHECK(h.instantiation() == "ns::k<kjit::half, kjit::bfloat16, -3, 1099511627776ll>");

  kjit::Spec t("x.cuh", "k");
  t.type("my::pair<int, float>");
  CHECK(t.instantiation() == "k<my::pair<int, float> >");
  CHECK(kjit::Spec("x.cuh", "plain").instantiation() == "plain");
}

// A string literal would convert to bool and make value(true): value(const char*) is deleted.
template <class T, class = void>
struct HasValue : std::false_type {};
template <class T>
struct HasValue<T, std::void_t<decltype(std::declval<kjit::Spec&>().value(std::declval<T>()))>>
    : std::true_type {};
static_assert(!HasValue<const char*>::value, "value(\"256\") would compile as value(true)");
static_assert(HasValue<int>::value && HasValue<bool>::value && HasValue<int64_t>::value);

TEST_CASE("spec: names that could inject source are rejected") {
  CHECK_KJIT_ERROR(kjit::Spec("x.cuh", "k; int evil"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::Spec("", "k"), kjit::Errc::InvalidArgument);
  kjit::Spec s("x.cuh", "k");
  CHECK_KJIT_ERROR(s.type("float\"); }"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(s.type(""), kjit::Errc::InvalidArgument);
}

TEST_CASE("dtype names parse and print") {
  CHECK(kjit::parse_dtype("fp32") == kjit::DType::F32);
  CHECK(kjit::parse_dtype("bfloat16") == kjit::DType::BF16);
  CHECK(kjit::parse_dtype("half") == kjit::DType::F16);
  CHECK(std::string(kjit::dtype_name(kjit::DType::BF16)) == "bf16");
  CHECK_KJIT_ERROR(kjit::parse_dtype("int8"), kjit::Errc::InvalidArgument);
}
