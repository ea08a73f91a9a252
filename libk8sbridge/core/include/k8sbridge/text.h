// Checked text-to-value conversions: the only way k8sbridge turns text into numbers.
//
// Every parser here reads the whole input: garbage, trailing junk, overflow and a
// value outside the caller's range are errors, never a value. A silent 0 from an
// unreadable input has real consequences here (a node drained for "0 GiB free"), so
// unchecked conversions (strtol, atoi, stod, ...) are not used anywhere else.
//
// Messages name the input and say what to write instead; callers add where the
// input came from (a file, a key, a program's output).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::text {

namespace internal {
Result<int64_t> ParseSigned(std::string_view text, int64_t min, int64_t max, int base);
Result<uint64_t> ParseUnsigned(std::string_view text, uint64_t min, uint64_t max, int base);
}  // namespace internal

// A whole number in [min, max], digits only (a leading '-' for signed types; no
// '+', blanks or "0x": pass base 16 for hex digits).
//   "'12x' is not a whole number", "0 is out of range: use 1 to 100000".
template <std::integral T>
Result<T> ParseInt(std::string_view text, T min = std::numeric_limits<T>::min(),
                   T max = std::numeric_limits<T>::max(), int base = 10) {
  if constexpr (std::is_signed_v<T>) {
    auto n = internal::ParseSigned(text, min, max, base);
    if (!n.ok())
      return n.status();
    return static_cast<T>(*n);
  } else {
    auto n = internal::ParseUnsigned(text, min, max, base);
    if (!n.ok())
      return n.status();
    return static_cast<T>(*n);
  }
}

// A finite decimal number ("75.5", "1e3") in [min, max]; no "inf" or "nan".
Result<double> ParseDouble(std::string_view text,
                           double min = std::numeric_limits<double>::lowest(),
                           double max = std::numeric_limits<double>::max());

// The duration syntax of k8sbridge.conf: "10" (seconds), "10s", "500ms" or "2m",
// in [min, max]; by default positive and at most a day.
Result<std::chrono::milliseconds> ParseDuration(
    std::string_view text, std::chrono::milliseconds min = std::chrono::milliseconds(1),
    std::chrono::milliseconds max = std::chrono::hours(24));

// "1500ms", "2s", "10m": how ParseDuration's input is written back in messages and
// docs (the largest unit that divides it).
std::string FormatDuration(std::chrono::milliseconds d);

// A Kubernetes resource quantity in base units: "8" -> 8, "500m" -> 0.5,
// "80Gi" -> 80 * 2^30, "1.5k" -> 1500, "2e3" -> 2000 (suffixes n u m k M G T P E and
// Ki Mi Gi Ti Pi Ei, as apimachinery's resource.Quantity).
Result<double> ParseQuantity(std::string_view text);

// The parts of `text` between `separator`s, empty ones included ("a,,b" -> a, "", b;
// "" -> one empty part).
std::vector<std::string_view> Split(std::string_view text, char separator);

// The parts with `separator` between them.
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
std::string Join(const std::vector<std::string_view>& parts, std::string_view separator);

// Whether `list` holds `item` (names, features, paths: short lists).
bool Contains(const std::vector<std::string>& list, std::string_view item);

}  // namespace k8sbridge::text
