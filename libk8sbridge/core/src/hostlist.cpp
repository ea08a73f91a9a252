#include "k8sbridge/hostlist.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "k8sbridge/text.h"

namespace k8sbridge {

namespace {

struct SplitName {
  std::string prefix;
  size_t width = 0;  // digits to pad to; 0 = not padded
  uint64_t number = 0;
  bool has_number = false;
};

SplitName Split(const std::string& name) {
  size_t digits_start = name.size();
  while (digits_start > 0 && std::isdigit(static_cast<unsigned char>(name[digits_start - 1]))) {
    --digits_start;
  }
  SplitName out;
  size_t digits = name.size() - digits_start;
  // More than 18 digits would not fit; treat such a name as a plain word.
  auto number = text::ParseInt<uint64_t>(std::string_view(name).substr(digits_start));
  if (digits > 18 || !number.ok()) {
    out.prefix = name;
    return out;
  }
  out.prefix = name.substr(0, digits_start);
  out.has_number = true;
  out.number = *number;
  out.width = (digits > 1 && name[digits_start] == '0') ? digits : 0;
  return out;
}

std::string FormatNumber(uint64_t n, size_t width) {
  return width == 0 ? fmt::format("{}", n) : fmt::format("{:0{}}", n, width);
}

}  // namespace

std::string CompressHostlist(std::vector<std::string> names) {
  // Group key: prefix and padding; names without a trailing number stand alone.
  std::map<std::tuple<std::string, size_t>, std::vector<uint64_t>> groups;
  std::vector<std::string> words;
  std::vector<SplitName> unpadded;
  for (const std::string& name : names) {
    SplitName split = Split(name);
    if (!split.has_number) {
      words.push_back(name);
    } else if (split.width > 0) {
      groups[{split.prefix, split.width}].push_back(split.number);
    } else {
      unpadded.push_back(std::move(split));
    }
  }
  // "n10" reads the same as a two-digit padded "n10", so it joins "n[08-09]".
  for (SplitName& split : unpadded) {
    size_t digits = fmt::formatted_size("{}", split.number);
    auto padded = groups.find({split.prefix, digits});
    if (digits > 1 && padded != groups.end()) {
      padded->second.push_back(split.number);
    } else {
      groups[{split.prefix, 0}].push_back(split.number);
    }
  }
  // Output ordered by prefix; plain words go where their name sorts.
  std::vector<std::pair<std::string, std::string>> parts;  // sort key, text
  for (auto& [key, numbers] : groups) {
    const auto& [prefix, width] = key;
    std::sort(numbers.begin(), numbers.end());
    numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
    if (numbers.size() == 1) {
      parts.emplace_back(prefix, prefix + FormatNumber(numbers[0], width));
      continue;
    }
    std::string ranges;
    for (size_t i = 0; i < numbers.size();) {
      size_t j = i;
      while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) {
        ++j;
      }
      if (!ranges.empty()) {
        ranges += ',';
      }
      ranges += FormatNumber(numbers[i], width);
      if (j > i) {
        ranges += '-';
        ranges += FormatNumber(numbers[j], width);
      }
      i = j + 1;
    }
    parts.emplace_back(prefix, prefix + "[" + ranges + "]");
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  for (const std::string& word : words) {
    parts.emplace_back(word, word);
  }
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [key, text] : parts) {
    if (!out.empty()) {
      out += ',';
    }
    out += text;
  }
  return out;
}

namespace {

// A host name is a DNS name, at most 255 characters. Without this bound the limit
// on the number of names would not bound memory: a 3000-character prefix before
// "[0-999999]" is 3 GB of names.
constexpr size_t kMaxNameLength = 255;

// The state of one ExpandHostlist call.
struct Expansion {
  std::string_view expression;
  size_t max_names;
  std::vector<std::string> names;

  Status Error(size_t pos, std::string_view expected) const {
    return Status::InvalidArgument(
        fmt::format("hostlist \"{}\" at character {}: expected {}", expression, pos + 1, expected));
  }
  // Room for `count` more names of up to `length` characters, or why not.
  Status Fits(size_t pos, uint64_t count, size_t length) const {
    if (length > kMaxNameLength)
      return Error(pos, fmt::format("names of at most {} characters", kMaxNameLength));
    if (count > max_names || names.size() + count > max_names)
      return Error(pos, fmt::format("at most {} names", max_names));
    return Status::Ok();
  }
};

// At most 18 digits, as a name's number (SplitName).
bool ParseRangeNumber(std::string_view text, uint64_t& value) {
  auto n = text::ParseInt<uint64_t>(text, 0, 999'999'999'999'999'999);
  if (!n.ok())
    return false;
  value = *n;
  return true;
}

// Appends prefix + N + suffix for each N of `ranges` ("0-3,7"), which starts at
// character `at` of the expression.
Status ExpandRanges(Expansion& e, const std::string& prefix, std::string_view ranges, size_t at,
                    const std::string& suffix) {
  for (size_t r = 0; r <= ranges.size();) {
    size_t comma = std::min(ranges.find(',', r), ranges.size());
    std::string_view range = ranges.substr(r, comma - r);
    size_t dash = range.find('-');
    std::string_view lo_text = range.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!ParseRangeNumber(lo_text, lo) || !ParseRangeNumber(hi_text, hi) || hi < lo)
      return e.Error(at + r, "a number or an ascending range N-M inside the brackets");
    size_t width = (lo_text.size() > 1 && lo_text[0] == '0') ? lo_text.size() : 0;
    size_t digits = std::max(width, fmt::formatted_size("{}", hi));
    if (Status s = e.Fits(at + r, hi - lo + 1, prefix.size() + digits + suffix.size()); !s.ok())
      return s;
    for (uint64_t n = lo; n <= hi; ++n)
      e.names.push_back(prefix + FormatNumber(n, width) + suffix);
    r = comma + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expression, size_t max_names) {
  Expansion e{expression, max_names, {}};
  size_t pos = 0;
  while (pos < expression.size()) {
    // One item: prefix, optional [ranges], optional suffix, up to a top-level comma.
    size_t item_start = pos;
    std::string prefix;
    while (pos < expression.size() && expression[pos] != ',' && expression[pos] != '[') {
      if (expression[pos] == ']')
        return e.Error(pos, "no ']' without a matching '['");
      prefix += expression[pos++];
    }
    if (pos < expression.size() && expression[pos] == '[') {
      size_t close = expression.find(']', pos);
      if (close == std::string_view::npos)
        return e.Error(pos, "a closing ']'");
      std::string suffix;
      size_t after = close + 1;
      while (after < expression.size() && expression[after] != ',') {
        if (expression[after] == '[' || expression[after] == ']')
          return e.Error(after, "at most one bracketed range per name");
        suffix += expression[after++];
      }
      std::string_view ranges = expression.substr(pos + 1, close - pos - 1);
      if (Status s = ExpandRanges(e, prefix, ranges, pos + 1, suffix); !s.ok())
        return s;
      pos = after;
    } else if (!prefix.empty()) {
      if (Status s = e.Fits(item_start, 1, prefix.size()); !s.ok())
        return s;
      e.names.push_back(prefix);
    } else if (pos < expression.size()) {
      return e.Error(pos, "a name before ','");
    }
    if (pos < expression.size() && expression[pos] == ',') {
      ++pos;
      if (pos == expression.size())
        return e.Error(pos - 1, "a name after ','");
    }
  }
  return std::move(e.names);
}

// A node list in k8sbridge.conf or from Slurm is at most a few hundred thousand
// names; anything larger is a typo such as "w-[0-9999999]".
constexpr size_t kMaxNames = 1'000'000;

Result<std::vector<std::string>> BuiltinHostlists::Expand(std::string_view expression) const {
  return ExpandHostlist(expression, kMaxNames);
}

std::string BuiltinHostlists::Compress(const std::vector<std::string>& names) const {
  return CompressHostlist(names);
}

}  // namespace k8sbridge
