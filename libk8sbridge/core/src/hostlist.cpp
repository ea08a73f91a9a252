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

Status HostlistError(std::string_view expression, size_t pos, std::string_view expected) {
  return Status::InvalidArgument(
      fmt::format("hostlist \"{}\" at character {}: expected {}", expression, pos + 1, expected));
}

// At most 18 digits, as a name's number (SplitName).
bool ParseRangeBound(std::string_view text, uint64_t& value) {
  auto n = text::ParseInt<uint64_t>(text, 0, 999'999'999'999'999'999);
  if (!n.ok())
    return false;
  value = *n;
  return true;
}

// Appends prefix + N + suffix for every N in the comma-separated ranges between
// the '[' at open and its ']'; error positions count from the expression's start.
Status ExpandBracketedRanges(std::string_view expression, size_t open, std::string_view ranges,
                             const std::string& prefix, const std::string& suffix, size_t max_names,
                             std::vector<std::string>& out) {
  size_t r = 0;
  while (r <= ranges.size()) {
    size_t comma = ranges.find(',', r);
    if (comma == std::string_view::npos) {
      comma = ranges.size();
    }
    std::string_view range = ranges.substr(r, comma - r);
    size_t dash = range.find('-');
    std::string_view lo_text = range.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!ParseRangeBound(lo_text, lo) || !ParseRangeBound(hi_text, hi) || hi < lo) {
      return HostlistError(expression, open + 1 + r,
                           "a number or an ascending range N-M inside the brackets");
    }
    size_t width = (lo_text.size() > 1 && lo_text[0] == '0') ? lo_text.size() : 0;
    if (hi - lo >= max_names || out.size() + (hi - lo + 1) > max_names) {
      return HostlistError(expression, open + 1 + r, fmt::format("at most {} names", max_names));
    }
    for (uint64_t n = lo; n <= hi; ++n) {
      out.push_back(prefix + FormatNumber(n, width) + suffix);
    }
    r = comma + 1;
    if (comma == ranges.size()) {
      break;
    }
  }
  return Status::Ok();
}

// Expands the item whose '[' is at open: its ranges and the suffix after ']'.
// Returns the position after the suffix (the item's ',' or the end).
Result<size_t> ExpandBracketedItem(std::string_view expression, size_t open,
                                   const std::string& prefix, size_t max_names,
                                   std::vector<std::string>& out) {
  size_t close = expression.find(']', open);
  if (close == std::string_view::npos) {
    return HostlistError(expression, open, "a closing ']'");
  }
  std::string_view ranges = expression.substr(open + 1, close - open - 1);
  std::string suffix;
  size_t after = close + 1;
  while (after < expression.size() && expression[after] != ',') {
    if (expression[after] == '[' || expression[after] == ']') {
      return HostlistError(expression, after, "at most one bracketed range per name");
    }
    suffix += expression[after++];
  }
  Status expanded = ExpandBracketedRanges(expression, open, ranges, prefix, suffix, max_names, out);
  if (!expanded.ok()) {
    return expanded;
  }
  return after;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expression, size_t max_names) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < expression.size()) {
    // One item: prefix, optional [ranges], optional suffix, up to a top-level comma.
    size_t item_start = pos;
    std::string prefix;
    while (pos < expression.size() && expression[pos] != ',' && expression[pos] != '[') {
      if (expression[pos] == ']') {
        return HostlistError(expression, pos, "no ']' without a matching '['");
      }
      prefix += expression[pos++];
    }
    if (pos < expression.size() && expression[pos] == '[') {
      auto after = ExpandBracketedItem(expression, pos, prefix, max_names, out);
      if (!after.ok()) {
        return after.status();
      }
      pos = *after;
    } else if (!prefix.empty()) {
      if (out.size() + 1 > max_names) {
        return HostlistError(expression, item_start, fmt::format("at most {} names", max_names));
      }
      out.push_back(prefix);
    } else if (pos < expression.size()) {
      return HostlistError(expression, pos, "a name before ','");
    }
    if (pos < expression.size() && expression[pos] == ',') {
      ++pos;
      if (pos == expression.size()) {
        return HostlistError(expression, pos - 1, "a name after ','");
      }
    }
  }
  return out;
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
