#include "k8sbridge/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace k8sbridge::text {

namespace {

Status NotWhole(std::string_view text) {
  return Status::InvalidArgument(fmt::format("'{}' is not a whole number", text));
}

template <typename T>
Status OutOfRange(std::string_view text, T min, T max) {
  return Status::InvalidArgument(fmt::format("{} is out of range: use {} to {}", text, min, max));
}

template <typename T>
Result<T> ParseWhole(std::string_view text, T min, T max, int base) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, base);
  if (ec == std::errc::result_out_of_range && ptr == end)
    return OutOfRange(text, min, max);
  if (text.empty() || ec != std::errc() || ptr != end)
    return NotWhole(text);
  if (value < min || value > max)
    return OutOfRange(text, min, max);
  return value;
}

struct QuantitySuffix {
  std::string_view suffix;
  double scale;
};

// Longest first, so "Mi" is tried before "M" and "m".
constexpr QuantitySuffix kQuantitySuffixes[] = {
    {"Ki", 0x1p10}, {"Mi", 0x1p20}, {"Gi", 0x1p30}, {"Ti", 0x1p40}, {"Pi", 0x1p50},
    {"Ei", 0x1p60}, {"n", 1e-9},    {"u", 1e-6},    {"m", 1e-3},    {"k", 1e3},
    {"M", 1e6},     {"G", 1e9},     {"T", 1e12},    {"P", 1e15},    {"E", 1e18},
};

// Splits "80Gi" into 80 and 2^30; a number without a suffix has scale 1.
std::pair<std::string_view, double> SplitQuantity(std::string_view text) {
  for (const QuantitySuffix& s : kQuantitySuffixes) {
    if (text.size() > s.suffix.size() && text.ends_with(s.suffix))
      return {text.substr(0, text.size() - s.suffix.size()), s.scale};
  }
  return {text, 1};
}

}  // namespace

namespace internal {

Result<int64_t> ParseSigned(std::string_view text, int64_t min, int64_t max, int base) {
  return ParseWhole<int64_t>(text, min, max, base);
}

Result<uint64_t> ParseUnsigned(std::string_view text, uint64_t min, uint64_t max, int base) {
  return ParseWhole<uint64_t>(text, min, max, base);
}

}  // namespace internal

Result<double> ParseDouble(std::string_view text, double min, double max) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return Status::InvalidArgument(fmt::format(
        "'{}' is not a number: write digits with an optional fraction, e.g. 2.5", text));
  }
  if (value < min || value > max) {
    return Status::InvalidArgument(
        fmt::format("{} is out of range: use {:g} to {:g}", text, min, max));
  }
  return value;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                std::chrono::milliseconds min,
                                                std::chrono::milliseconds max) {
  std::string_view number = text;
  int64_t scale = 1000;
  if (number.size() > 2 && number.ends_with("ms")) {
    number.remove_suffix(2);
    scale = 1;
  } else if (number.size() > 1 && number.ends_with("s")) {
    number.remove_suffix(1);
  } else if (number.size() > 1 && number.ends_with("m")) {
    number.remove_suffix(1);
    scale = 60'000;
  }
  bool digits = !number.empty() && std::all_of(number.begin(), number.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a duration: write seconds (10), or 10s, 500ms or 2m", text));
  }
  // Digits that do not fit are a duration too long for any range.
  auto n = ParseInt<int64_t>(number, 0, std::numeric_limits<int64_t>::max() / scale);
  std::chrono::milliseconds value =
      n.ok() ? std::chrono::milliseconds(*n * scale) : std::chrono::milliseconds::max();
  if (value < min || value > max) {
    return Status::InvalidArgument(fmt::format("'{}' is out of range: give {} to {}", text,
                                               FormatDuration(min), FormatDuration(max)));
  }
  return value;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms != 0 && ms % 60'000 == 0)
    return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0)
    return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

Result<double> ParseQuantity(std::string_view text) {
  auto [number, scale] = SplitQuantity(text);
  auto value = ParseDouble(number);
  if (!value.ok()) {
    return Status::InvalidArgument(fmt::format(
        "'{}' is not a Kubernetes quantity: write a number with an optional suffix, e.g. 8, "
        "500m or 80Gi",
        text));
  }
  double result = *value * scale;
  if (!std::isfinite(result)) {
    return Status::InvalidArgument(
        fmt::format("'{}' is out of range: a quantity must be finite", text));
  }
  return result;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(separator, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos)
      break;
    start = pos + 1;
  }
  return parts;
}

namespace {
template <typename Part>
std::string JoinParts(const std::vector<Part>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0)
      out += separator;
    out += parts[i];
  }
  return out;
}
}  // namespace

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  return JoinParts(parts, separator);
}

std::string Join(const std::vector<std::string_view>& parts, std::string_view separator) {
  return JoinParts(parts, separator);
}

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace k8sbridge::text
