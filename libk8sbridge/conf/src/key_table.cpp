#include "k8sbridge/conf/key_table.h"

#include <limits>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "k8sbridge/text.h"

namespace k8sbridge::conf {

namespace {

using std::chrono::milliseconds;

// --- Validators of the string types: "" when the value is fine, else what is wrong. ---

std::string AbsolutePathError(std::string_view value) {
  return !value.empty() && value.front() == '/' ? "" : "it is not an absolute path";
}

// Configuration is read once at start, never on a hot path: std::regex reports
// a bad pattern only by throwing.
std::string RegexError(std::string_view value) {
  try {
    std::regex re(value.begin(), value.end(), std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    return e.what();
  }
  return "";
}

std::string HostPortError(std::string_view value) {
  size_t colon = value.rfind(':');
  if (value.empty())
    return "";
  if (colon == std::string_view::npos || colon == 0 ||
      !text::ParseInt<int>(value.substr(colon + 1), 0, 65535).ok()) {
    return "it is not HOST:PORT";
  }
  return "";
}

std::string FeatureNameError(std::string_view value) {
  if (value.empty())
    return "it is empty";
  for (char c : value) {
    if (std::string_view("&|,*[]()!=: \t").find(c) != std::string_view::npos)
      return fmt::format("it has '{}'", c);
  }
  return "";
}

// The validator and the message a string type has when its row names none.
struct TypeRule {
  Validator validate;
  std::string_view message;
};

std::optional<TypeRule> StringRuleOf(KeyType type) {
  switch (type) {
    case KeyType::kString:
    case KeyType::kHostlist:
      return TypeRule{nullptr, {}};
    case KeyType::kAbsolutePath:
      return TypeRule{AbsolutePathError, "'{value}' is not an absolute path"};
    case KeyType::kLabelKey:
      return TypeRule{LabelKeyError, "'{value}' is not a Kubernetes label key: {error}"};
    case KeyType::kLabelValue:
      return TypeRule{LabelValueError, "'{value}' is not a Kubernetes label value: {error}"};
    case KeyType::kDnsLabel:
      return TypeRule{Dns1123LabelError, "'{value}' is not a DNS-1123 label: {error}"};
    case KeyType::kRegex:
      return TypeRule{RegexError, "'{value}' is not a regular expression ({error})"};
    case KeyType::kHostPort:
      return TypeRule{HostPortError, "'{value}' is not HOST:PORT"};
    case KeyType::kFeatureName:
      return TypeRule{FeatureNameError, "'{value}' is not a Slurm feature name: {error}"};
    default:
      return std::nullopt;
  }
}

Result<PlacementAffinity> ParseAffinity(std::string_view value) {
  for (PlacementAffinity a :
       {PlacementAffinity::kRequired, PlacementAffinity::kPreferred, PlacementAffinity::kNone}) {
    if (KeyEquals(value, PlacementAffinityName(a)))
      return a;
  }
  return Status::InvalidArgument(
      fmt::format("'{}' is not one of required, preferred or none", value));
}

// `pattern` with {value} and {error} filled in.
Status Refuse(std::string_view pattern, std::string_view value, std::string_view error) {
  return Status::InvalidArgument(
      fmt::format(fmt::runtime(pattern), fmt::arg("value", value), fmt::arg("error", error)));
}

// What the type read, or its error worded by the row's fix.
template <typename T>
Result<T> Worded(const ValueRule& rule, std::string_view value, Result<T> read) {
  if (!read.ok())
    return RefuseValue(rule, value, read.status().message());
  return read;
}

template <typename T>
Result<std::optional<T>> Optional(Result<T> read) {
  if (!read.ok())
    return read.status();
  return std::optional<T>(std::move(*read));
}

Range RangeOr(const ValueRule& rule, double min, double max) {
  return rule.range.value_or(Range{min, max});
}

Result<std::string> ReadString(const ValueRule& rule, std::string_view value) {
  std::optional<TypeRule> type = StringRuleOf(rule.type);
  if (!type)
    return FieldMismatch(rule);
  if (Validator validate = rule.validate ? rule.validate : type->validate) {
    if (std::string error = validate(value); !error.empty()) {
      std::string_view pattern = !rule.fix.empty()        ? rule.fix
                                 : !type->message.empty() ? type->message
                                                          : "'{value}': {error}";
      return Refuse(pattern, value, error);
    }
  }
  return std::string(value);
}

Result<int> ReadInt(const ValueRule& rule, std::string_view value) {
  if (rule.type != KeyType::kInt)
    return FieldMismatch(rule);
  if (!rule.zero_word.empty() && value == rule.zero_word)
    return 0;
  const Range range =
      RangeOr(rule, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  const double lo = std::max<double>(range.min, std::numeric_limits<int>::min());
  const double hi = std::min<double>(range.max, std::numeric_limits<int>::max());
  return Worded(rule, value,
                text::ParseInt<int>(value, static_cast<int>(lo), static_cast<int>(hi)));
}

// The row's range within what U holds; a bound beyond U's is U's own (a double
// at U's maximum may round above it).
template <typename U>
std::pair<U, U> CountBounds(const ValueRule& rule) {
  constexpr U kMax = std::numeric_limits<U>::max();
  if (!rule.range)
    return {0, kMax};
  const U lo = rule.range->min <= 0 ? 0 : static_cast<U>(rule.range->min);
  const U hi =
      rule.range->max >= static_cast<double>(kMax) ? kMax : static_cast<U>(rule.range->max);
  return {lo, hi};
}

template <typename U>
Result<U> ReadCount(const ValueRule& rule, std::string_view value) {
  if (rule.type != KeyType::kCount && rule.type != KeyType::kBitmask)
    return FieldMismatch(rule);
  auto [lo, hi] = CountBounds<U>(rule);
  return Worded(rule, value, ParseCount<U>(value, lo, hi));
}

Result<std::set<unsigned>> ReadCountSet(const ValueRule& rule, std::string_view value) {
  if (rule.type != KeyType::kCountSet)
    return FieldMismatch(rule);
  std::set<unsigned> out;
  for (std::string_view item : text::Split(value, ',')) {
    if (item.empty())
      continue;
    auto n = ParseCount<unsigned>(item);
    if (!n.ok())
      return RefuseValue(rule, value, n.status().message());
    out.insert(*n);
  }
  return out;
}

Result<milliseconds> ReadDuration(const ValueRule& rule, std::string_view value) {
  if (rule.type != KeyType::kDuration)
    return FieldMismatch(rule);
  if (!rule.range)
    return Worded(rule, value, text::ParseDuration(value));
  return Worded(rule, value,
                text::ParseDuration(value, milliseconds(static_cast<int64_t>(rule.range->min)),
                                    milliseconds(static_cast<int64_t>(rule.range->max))));
}

// A type read by one parser: `parse` when the row's type is `type`.
template <typename T, typename Parse>
Result<T> ReadAs(const ValueRule& rule, std::string_view value, KeyType type, Parse parse) {
  if (rule.type != type)
    return FieldMismatch(rule);
  return Worded(rule, value, parse(value));
}

// A default as the docs write it: "—" for nothing, code font where markdown
// would read the characters as markup.
std::string DocString(const std::string& value) {
  if (value.empty())
    return "—";
  if (value.find_first_of("\\|*_[") == std::string::npos)
    return value;
  std::string escaped;
  for (char c : value)
    escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return "`" + escaped + "`";
}

}  // namespace

Status RefuseValue(const ValueRule& rule, std::string_view value, std::string_view message) {
  if (rule.fix.empty())
    return Status::InvalidArgument(std::string(message));
  return Refuse(rule.fix, value, message);
}

Status FieldMismatch(const ValueRule& rule) {
  return Status::Internal(fmt::format("key table: {}'s field does not hold its type", rule.name));
}

template <typename T>
Result<T> ReadValue(const ValueRule& rule, std::string_view value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return ReadString(rule, value);
  } else if constexpr (std::is_same_v<T, bool>) {
    return ReadAs<bool>(rule, value, KeyType::kBool,
                        [](std::string_view v) { return ParseBool(std::string(v)); });
  } else if constexpr (std::is_same_v<T, int>) {
    return ReadInt(rule, value);
  } else if constexpr (std::is_same_v<T, std::optional<int>>) {
    return Optional(ReadInt(rule, value));
  } else if constexpr (std::is_same_v<T, double>) {
    const Range range =
        RangeOr(rule, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
    return ReadAs<double>(rule, value, KeyType::kDouble, [&](std::string_view v) {
      return text::ParseDouble(v, range.min, range.max);
    });
  } else if constexpr (std::is_same_v<T, milliseconds>) {
    return ReadDuration(rule, value);
  } else if constexpr (std::is_same_v<T, PlacementAffinity>) {
    return ReadAs<T>(rule, value, KeyType::kAffinity, ParseAffinity);
  } else if constexpr (std::is_same_v<T, std::vector<LabelRequirement>>) {
    return ReadAs<T>(rule, value, KeyType::kSelector, ParseLabelSelector);
  } else if constexpr (std::is_same_v<T, unsigned>) {
    return ReadCount<unsigned>(rule, value);
  } else if constexpr (std::is_same_v<T, std::optional<unsigned>>) {
    return Optional(ReadCount<unsigned>(rule, value));
  } else if constexpr (std::is_same_v<T, unsigned long long>) {
    return ReadCount<unsigned long long>(rule, value);
  } else {
    static_assert(std::is_same_v<T, std::set<unsigned>>, "a field type the key rows know");
    return ReadCountSet(rule, value);
  }
}

template <typename T>
std::string ShowDefault(const ValueRule& rule, const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return DocString(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "yes" : "no";
  } else if constexpr (std::is_same_v<T, int>) {
    return value == 0 && !rule.zero_word.empty() ? std::string(rule.zero_word)
                                                 : std::to_string(value);
  } else if constexpr (std::is_same_v<T, double>) {
    return fmt::format("{:g}", value);
  } else if constexpr (std::is_same_v<T, milliseconds>) {
    return text::FormatDuration(value);
  } else if constexpr (std::is_same_v<T, PlacementAffinity>) {
    return std::string(PlacementAffinityName(value));
  } else if constexpr (std::is_same_v<T, unsigned> || std::is_same_v<T, unsigned long long>) {
    return rule.type == KeyType::kBitmask ? fmt::format("{:#x}", value) : std::to_string(value);
  } else if constexpr (std::is_same_v<T, std::optional<int>> ||
                       std::is_same_v<T, std::optional<unsigned>>) {
    return value ? ShowDefault(rule, *value) : "—";
  } else if constexpr (std::is_same_v<T, std::set<unsigned>>) {
    return value.empty() ? "—" : fmt::format("{}", fmt::join(value, ","));
  } else {
    return "—";  // label requirements, a reader's field
  }
}

// Every field type of Field<R>: what ApplyKey and DefaultDoc may ask for.
#define K8SBRIDGE_KEY_FIELD_TYPE(T)                                    \
  template Result<T> ReadValue<T>(const ValueRule&, std::string_view); \
  template std::string ShowDefault<T>(const ValueRule&, const T&);
K8SBRIDGE_KEY_FIELD_TYPE(std::string)
K8SBRIDGE_KEY_FIELD_TYPE(bool)
K8SBRIDGE_KEY_FIELD_TYPE(int)
K8SBRIDGE_KEY_FIELD_TYPE(std::optional<int>)
K8SBRIDGE_KEY_FIELD_TYPE(double)
K8SBRIDGE_KEY_FIELD_TYPE(milliseconds)
K8SBRIDGE_KEY_FIELD_TYPE(PlacementAffinity)
K8SBRIDGE_KEY_FIELD_TYPE(std::vector<LabelRequirement>)
K8SBRIDGE_KEY_FIELD_TYPE(unsigned)
K8SBRIDGE_KEY_FIELD_TYPE(std::optional<unsigned>)
K8SBRIDGE_KEY_FIELD_TYPE(unsigned long long)
K8SBRIDGE_KEY_FIELD_TYPE(std::set<unsigned>)
#undef K8SBRIDGE_KEY_FIELD_TYPE
template std::string ShowDefault<std::monostate>(const ValueRule&, const std::monostate&);

std::string KeysMarkdownHeader(std::string_view first_column) {
  return fmt::format("| {} | default | meaning |\n|---|---|---|\n", first_column);
}

std::string KeyMarkdownRow(std::string_view name, std::string_view syntax,
                           std::string_view default_doc, std::string_view doc) {
  std::string key(name);
  if (!syntax.empty()) {
    key += '=';
    for (char c : syntax)
      key += c == '|' ? std::string("\\|") : std::string(1, c);
  }
  return fmt::format("| `{}` | {} | {} |\n", key, default_doc, doc);
}

}  // namespace k8sbridge::conf
