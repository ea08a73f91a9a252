#include "quantity.h"

#include <cctype>
#include <string>

#include <fmt/format.h>

namespace kubesim {

using k8sbridge::Status;

Result<int64_t> ParseQuantityMilli(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument(fmt::format(
        "quantity \"{}\" is not valid ({}): write a number with an optional suffix, such as "
        "\"500m\", \"2\", \"4Gi\" or \"1e3\"",
        text, why));
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::string digits;
  int fraction_digits = 0;
  bool seen_point = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      digits += s[i];
      if (seen_point)
        ++fraction_digits;
    } else if (s[i] == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (digits.empty())
    return bad("no digits");
  std::string_view suffix = s.substr(i);
  int exp10 = -fraction_digits + 3;  // milli-units
  int exp2 = 0;
  if (suffix.empty()) {
  } else if (suffix == "n") {
    exp10 -= 9;
  } else if (suffix == "u") {
    exp10 -= 6;
  } else if (suffix == "m") {
    exp10 -= 3;
  } else if (suffix == "k") {
    exp10 += 3;
  } else if (suffix == "M") {
    exp10 += 6;
  } else if (suffix == "G") {
    exp10 += 9;
  } else if (suffix == "T") {
    exp10 += 12;
  } else if (suffix == "P") {
    exp10 += 15;
  } else if (suffix == "E") {
    exp10 += 18;
  } else if (suffix == "Ki") {
    exp2 = 10;
  } else if (suffix == "Mi") {
    exp2 = 20;
  } else if (suffix == "Gi") {
    exp2 = 30;
  } else if (suffix == "Ti") {
    exp2 = 40;
  } else if (suffix == "Pi") {
    exp2 = 50;
  } else if (suffix == "Ei") {
    exp2 = 60;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string exp(suffix.substr(1));
    char* end = nullptr;
    errno = 0;
    const long e = std::strtol(exp.c_str(), &end, 10);
    if (exp.empty() || *end != '\0' || errno != 0 || e > 40 || e < -40)
      return bad("exponent");
    exp10 += static_cast<int>(e);
  } else {
    return bad("unknown suffix");
  }
  // Strip leading zeros so the digit limit below is about significant digits.
  size_t first = digits.find_first_not_of('0');
  digits = first == std::string::npos ? "0" : digits.substr(first);
  if (digits.size() > 30)
    return bad("too many digits");
  __int128 value = 0;
  for (char c : digits)
    value = value * 10 + (c - '0');
  const __int128 kMax = static_cast<__int128>(INT64_MAX);
  value <<= exp2;
  if (value > kMax * 1000 * 1000)
    return bad("too large");
  bool inexact = false;
  for (; exp10 < 0; ++exp10) {
    inexact = inexact || value % 10 != 0;
    value /= 10;
  }
  if (inexact)
    value += 1;  // round up, as MilliValue does
  for (; exp10 > 0; --exp10) {
    value *= 10;
    if (value > kMax)
      return bad("too large");
  }
  if (value > kMax)
    return bad("too large");
  return static_cast<int64_t>(negative ? -value : value);
}

}  // namespace kubesim
