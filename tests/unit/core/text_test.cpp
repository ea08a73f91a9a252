#include <chrono>
#include <cstdint>
#include <string>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/text.h"

namespace text = k8sbridge::text;
using std::chrono::milliseconds;

namespace {

// The error message of a failed parse ("" when it parsed).
template <typename R>
std::string ErrorOf(const R& result) {
  return result.ok() ? "" : result.status().message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(text_parsing)

BOOST_AUTO_TEST_CASE(integers_read_the_whole_input) {
  BOOST_TEST(*text::ParseInt<int>("42") == 42);
  BOOST_TEST(*text::ParseInt<int>("-7") == -7);
  BOOST_TEST(*text::ParseInt<uint64_t>("18446744073709551615") == UINT64_MAX);
  BOOST_TEST(*text::ParseInt<uint64_t>("ff", 0, UINT64_MAX, 16) == 255u);
  BOOST_TEST(ErrorOf(text::ParseInt<int>("")) == "'' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("many")) == "'many' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("12x")) == "'12x' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<int>(" 12")) == "' 12' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("+12")) == "'+12' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("1.5")) == "'1.5' is not a whole number");
  BOOST_TEST(ErrorOf(text::ParseInt<unsigned>("-1")) == "'-1' is not a whole number");
}

BOOST_AUTO_TEST_CASE(integers_out_of_range_or_overflowing_are_errors) {
  BOOST_TEST(ErrorOf(text::ParseInt<int>("0", 1, 100'000)) == "0 is out of range: use 1 to 100000");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("100001", 1, 100'000)) ==
             "100001 is out of range: use 1 to 100000");
  BOOST_TEST(ErrorOf(text::ParseInt<int>("99999999999999999999")) ==
             "99999999999999999999 is out of range: use -2147483648 to 2147483647");
  BOOST_TEST(ErrorOf(text::ParseInt<uint8_t>("256")) == "256 is out of range: use 0 to 255");
  BOOST_TEST(*text::ParseInt<int>("100000", 1, 100'000) == 100'000);
}

BOOST_AUTO_TEST_CASE(doubles_are_finite_and_in_range) {
  BOOST_TEST(*text::ParseDouble("75.5") == 75.5);
  BOOST_TEST(*text::ParseDouble("1e3") == 1000.0);
  BOOST_TEST(*text::ParseDouble("-0.25") == -0.25);
  for (const char* bad : {"", "fast", "1.5x", "inf", "nan", "1e999", " 1", "0x10"}) {
    BOOST_TEST(ErrorOf(text::ParseDouble(bad)) ==
                   "'" + std::string(bad) +
                       "' is not a number: write digits with an optional fraction, e.g. 2.5",
               bad);
  }
  BOOST_TEST(ErrorOf(text::ParseDouble("0", 0.001, 100'000)) ==
             "0 is out of range: use 0.001 to 100000");
}

BOOST_AUTO_TEST_CASE(durations_in_the_conf_syntax) {
  BOOST_TEST(text::ParseDuration("10")->count() == 10'000);
  BOOST_TEST(text::ParseDuration("10s")->count() == 10'000);
  BOOST_TEST(text::ParseDuration("500ms")->count() == 500);
  BOOST_TEST(text::ParseDuration("2m")->count() == 120'000);
  BOOST_TEST(text::ParseDuration("0", milliseconds(0))->count() == 0);
  const std::string fix = "' is not a duration: write seconds (10), or 10s, 500ms or 2m";
  for (const char* bad : {"", "s", "ms", "soon", "10h", "1.5s", "-1s", "10 s", "5sec", "m"})
    BOOST_TEST(ErrorOf(text::ParseDuration(bad)) == "'" + std::string(bad) + fix, bad);
}

BOOST_AUTO_TEST_CASE(durations_out_of_range_or_overflowing_are_errors) {
  BOOST_TEST(ErrorOf(text::ParseDuration("25h")) ==
             "'25h' is not a duration: write seconds (10), or 10s, 500ms or 2m");
  BOOST_TEST(ErrorOf(text::ParseDuration("86401")) == "'86401' is out of range: give 1ms to 1440m");
  BOOST_TEST(ErrorOf(text::ParseDuration("99999999999999999999m")) ==
             "'99999999999999999999m' is out of range: give 1ms to 1440m");
  BOOST_TEST(ErrorOf(text::ParseDuration("9223372036854775m")) ==
             "'9223372036854775m' is out of range: give 1ms to 1440m");
  BOOST_TEST(ErrorOf(text::ParseDuration("5ms", milliseconds(100), milliseconds(600'000))) ==
             "'5ms' is out of range: give 100ms to 10m");
  BOOST_TEST(ErrorOf(text::ParseDuration("0", milliseconds(1))) ==
             "'0' is out of range: give 1ms to 1440m");
}

BOOST_AUTO_TEST_CASE(durations_format_back_in_the_largest_unit) {
  BOOST_TEST(text::FormatDuration(milliseconds(1500)) == "1500ms");
  BOOST_TEST(text::FormatDuration(milliseconds(2000)) == "2s");
  BOOST_TEST(text::FormatDuration(milliseconds(600'000)) == "10m");
  BOOST_TEST(text::FormatDuration(milliseconds(0)) == "0s");
}

BOOST_AUTO_TEST_CASE(kubernetes_quantities) {
  BOOST_TEST(*text::ParseQuantity("8") == 8.0);
  BOOST_TEST(*text::ParseQuantity("500m") == 0.5);
  BOOST_TEST(*text::ParseQuantity("2000m") == 2.0);
  BOOST_TEST(*text::ParseQuantity("80Gi") == 80.0 * 1024 * 1024 * 1024);
  BOOST_TEST(*text::ParseQuantity("1.5k") == 1500.0);
  BOOST_TEST(*text::ParseQuantity("2M") == 2e6);
  BOOST_TEST(*text::ParseQuantity("2Mi") == 2.0 * 1024 * 1024);
  BOOST_TEST(*text::ParseQuantity("2e3") == 2000.0);
  const std::string fix =
      "' is not a Kubernetes quantity: write a number with an optional suffix, e.g. 8, 500m or "
      "80Gi";
  for (const char* bad : {"", "Gi", "m", "lots", "8 Gi", "8GB", "8gi", "1.5.2", "nan", "inf"})
    BOOST_TEST(ErrorOf(text::ParseQuantity(bad)) == "'" + std::string(bad) + fix, bad);
  BOOST_TEST(ErrorOf(text::ParseQuantity("1e308E")) ==
             "'1e308E' is out of range: a quantity must be finite");
}

BOOST_AUTO_TEST_CASE(split_keeps_empty_parts_and_join_reverses_it) {
  auto parts = text::Split("a,,b", ',');
  BOOST_TEST(parts.size() == 3u);
  BOOST_TEST(parts[1].empty());
  BOOST_TEST(text::Split("", ',').size() == 1u);
  BOOST_TEST(text::Join(parts, ",") == "a,,b");
  BOOST_TEST(text::Join(std::vector<std::string>{"w-1", "w-2"}, ", ") == "w-1, w-2");
  BOOST_TEST(text::Join(std::vector<std::string>{}, ",").empty());
}

BOOST_AUTO_TEST_SUITE_END()
