#include "k8sbridge/conf/conf_file.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "k8sbridge/text.h"

namespace k8sbridge::conf {

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}
bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsAlnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
char Lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Joins physical lines that end in '\' (outside a comment) into logical lines.
struct LogicalLine {
  int line;
  std::string text;
};

std::vector<LogicalLine> JoinContinuations(std::string_view text) {
  std::vector<LogicalLine> out;
  int line_no = 0;
  bool continuing = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view physical = text.substr(pos, end - pos);
    ++line_no;
    if (!physical.empty() && physical.back() == '\r')
      physical.remove_suffix(1);
    bool continues = !physical.empty() && physical.back() == '\\' &&
                     physical.find('#') == std::string_view::npos;
    if (continues)
      physical.remove_suffix(1);
    if (continuing) {
      out.back().text.append(" ").append(physical);
    } else {
      out.push_back({line_no, std::string(physical)});
    }
    continuing = continues;
    if (end == text.size())
      break;
    pos = end + 1;
  }
  return out;
}

}  // namespace

bool KeyEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

Result<std::vector<ConfLine>> LexConf(std::string_view text, std::string_view file) {
  std::vector<ConfLine> lines;
  for (const LogicalLine& logical : JoinContinuations(text)) {
    const std::string& s = logical.text;
    ConfLine line{logical.line, {}};
    size_t i = 0;
    auto where = [&](size_t at) { return fmt::format("{}:{}:{}", file, logical.line, at + 1); };
    while (i < s.size()) {
      while (i < s.size() && IsSpace(s[i]))
        ++i;
      if (i >= s.size() || s[i] == '#')
        break;
      size_t key_start = i;
      while (i < s.size() && s[i] != '=' && !IsSpace(s[i]) && s[i] != '#')
        ++i;
      std::string key = s.substr(key_start, i - key_start);
      if (i >= s.size() || s[i] != '=') {
        return Status::InvalidArgument(fmt::format(
            "{}: '{}' is not a Key=Value pair: write it as {}=<value> (values with spaces go in "
            "double quotes)",
            where(key_start), key, key));
      }
      if (key.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: '=' without a key before it: write Key=Value", where(key_start)));
      }
      ++i;  // '='
      std::string value;
      if (i < s.size() && (s[i] == '"' || s[i] == '\'')) {
        char quote = s[i];
        size_t quote_at = i++;
        bool closed = false;
        while (i < s.size()) {
          if (s[i] == '\\' && quote == '"' && i + 1 < s.size() &&
              (s[i + 1] == '"' || s[i + 1] == '\\')) {
            value.push_back(s[i + 1]);
            i += 2;
          } else if (s[i] == quote) {
            closed = true;
            ++i;
            break;
          } else {
            value.push_back(s[i++]);
          }
        }
        if (!closed) {
          return Status::InvalidArgument(fmt::format(
              "{}: the value of {} opens a quote ({}) that is never closed: add the closing {} "
              "on the same line",
              where(quote_at), key, quote, quote));
        }
        if (i < s.size() && !IsSpace(s[i]) && s[i] != '#') {
          return Status::InvalidArgument(
              fmt::format("{}: text right after the closing quote of {}: put a space between pairs",
                          where(i), key));
        }
      } else {
        size_t value_start = i;
        while (i < s.size() && !IsSpace(s[i]) && s[i] != '#') {
          if (s[i] == '"' || s[i] == '\'') {
            return Status::InvalidArgument(fmt::format(
                "{}: a quote inside the value of {}: quote the whole value, as in {}=\"a b\"",
                where(i), key, key));
          }
          ++i;
        }
        value = s.substr(value_start, i - value_start);
      }
      line.pairs.push_back({std::move(key), std::move(value), static_cast<int>(key_start) + 1});
    }
    if (!line.pairs.empty())
      lines.push_back(std::move(line));
  }
  return lines;
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
      row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t above = row[j];
        size_t cost = Lower(a[i - 1]) == Lower(b[j - 1]) ? 0 : 1;
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  size_t limit = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (std::string_view candidate : candidates) {
    size_t d = distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string Dns1123LabelError(std::string_view name) {
  if (name.empty())
    return "it is empty";
  if (name.size() > 63)
    return fmt::format("it is {} characters long, at most 63 are allowed", name.size());
  for (char c : name) {
    if (!IsLowerAlnum(c) && c != '-') {
      return std::isupper(static_cast<unsigned char>(c))
                 ? fmt::format(
                       "it has the upper-case letter '{}'; only a-z, 0-9 and '-' are allowed", c)
                 : fmt::format("it has the character '{}'; only a-z, 0-9 and '-' are allowed", c);
    }
  }
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) {
    return "it must start and end with a letter or digit";
  }
  return "";
}

namespace {
std::string LabelNameError(std::string_view name, std::string_view what) {
  if (name.size() > 63)
    return fmt::format("{} is {} characters long, at most 63 are allowed", what, name.size());
  for (char c : name) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return fmt::format(
          "{} has the character '{}'; only A-Z, a-z, 0-9, '-', '_' and '.' are allowed", what, c);
    }
  }
  if (!name.empty() && (!IsAlnum(name.front()) || !IsAlnum(name.back()))) {
    return fmt::format("{} must start and end with a letter or digit", what);
  }
  return "";
}
}  // namespace

std::string LabelValueError(std::string_view value) {
  return LabelNameError(value, "the value");
}

std::string Dns1123SubdomainError(std::string_view name) {
  if (name.empty() || name.size() > 253)
    return fmt::format("it is {} characters long; 1-253 are allowed", name.size());
  for (std::string_view part : text::Split(name, '.')) {
    if (std::string error = Dns1123LabelError(part); !error.empty())
      return fmt::format("part '{}': {}", part, error);
  }
  return "";
}

std::string LabelKeyError(std::string_view key) {
  std::string_view name = key;
  size_t slash = key.find('/');
  if (slash != std::string_view::npos) {
    std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253)
      return "the prefix before '/' must be 1-253 characters";
    if (std::string error = Dns1123SubdomainError(prefix); !error.empty())
      return fmt::format("the prefix '{}' is not a DNS subdomain: {}", prefix, error);
  }
  if (name.empty())
    return "the name part is empty";
  return LabelNameError(name, "the name part");
}

Result<bool> ParseBool(const std::string& value) {
  for (std::string_view yes : {"yes", "true", "1", "on"}) {
    if (KeyEquals(value, yes))
      return true;
  }
  for (std::string_view no : {"no", "false", "0", "off"}) {
    if (KeyEquals(value, no))
      return false;
  }
  return Status::InvalidArgument(fmt::format("'{}' is not yes or no", value));
}

}  // namespace k8sbridge::conf
