// Key rows, in the style of Slurm's s_p_options_t: one row per key says its name,
// how its value is read (type, range, validator), which field of the record it
// fills, what to say when the value is refused, and one line of documentation. A
// parser finds the row of each Key=Value it meets (FindKey) and applies it
// (ApplyKey); the docs' reference table is rendered from the same rows
// (KeysMarkdown), and each table's unit test checks that the docs hold it.
//
// The tables: k8sbridge.conf (conf_keys.h), k8sbridge-health.conf
// (health/config.h) and spank_jail's plugstack.conf options (jail/options.h). A
// new key is one row there.
#pragma once

#include <chrono>
#include <concepts>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/status.h"
#include "k8sbridge/text.h"

namespace k8sbridge::conf {

// How a value is read. Types with a syntax of their own (label key, DNS label,
// ...) are strings checked by that syntax's validator.
enum class KeyType {
  kString,
  kAbsolutePath,
  kBool,
  kInt,       // whole number within the row's range
  kDouble,    // number within the row's range
  kDuration,  // "10", "10s", "500ms", "2m" within the row's range
  kAffinity,  // required, preferred or none
  kLabelKey,
  kLabelValue,
  kDnsLabel,
  kRegex,     // ECMAScript, case-insensitive
  kHostPort,  // HOST:PORT, or empty
  kHostlist,  // a Slurm hostlist, expanded by the parser
  kSelector,  // label requirements, see ParseLabelSelector
  kFeatureName,
  kCount,     // whole number from 0, decimal or hex after 0x, within the range and the field
  kBitmask,   // read as kCount; the docs show the default in hex
  kCountSet,  // comma-separated kCount numbers; empty items are skipped
  kCustom,    // the row's field is a Reader that reads the value itself
};

// The component a k8sbridge.conf key configures: the section of BridgeConfig it
// fills, or the record line (NodeGroup=, Feature=) it belongs on. kNone: a file
// without sections (k8sbridge-health.conf, spank_jail's options).
enum class Section {
  kCluster,
  kKube,
  kPower,
  kSync,
  kFeatures,
  kWorker,
  kNodeGroup,
  kFeature,
  kNone
};

// Reads a value with a syntax of its own into the record; the message says what
// is wrong with the value (the row's fix, when it has one, replaces it).
template <typename R>
using Reader = Status (*)(std::string_view value, R& record);

// Where a key stores its value in record R. Rows name it as In<&section, &member>
// or At<&member>, or give a Reader (type kCustom).
template <typename R>
using Field =
    std::variant<std::string& (*)(R&), bool& (*)(R&), int& (*)(R&), std::optional<int>& (*)(R&),
                 double& (*)(R&), std::chrono::milliseconds& (*)(R&), PlacementAffinity& (*)(R&),
                 std::vector<LabelRequirement>& (*)(R&), unsigned& (*)(R&),
                 std::optional<unsigned>& (*)(R&), unsigned long long& (*)(R&),
                 std::set<unsigned>& (*)(R&), Reader<R>>;

namespace internal {
template <typename Pointer>
struct MemberOf;
template <typename Class, typename Type>
struct MemberOf<Type Class::*> {
  using ClassType = Class;
  using MemberType = Type;
};
template <auto kSection, auto kMember>
typename MemberOf<decltype(kMember)>::MemberType& InSection(
    typename MemberOf<decltype(kSection)>::ClassType& record) {
  return (record.*kSection).*kMember;
}
template <auto kMember>
typename MemberOf<decltype(kMember)>::MemberType& InRecord(
    typename MemberOf<decltype(kMember)>::ClassType& record) {
  return record.*kMember;
}
}  // namespace internal

// In<&BridgeConfig::kube, &KubeConf::qps>: the member of a section of the record.
template <auto kSection, auto kMember>
inline constexpr auto In = &internal::InSection<kSection, kMember>;
// At<&NodeGroup::gpus>: a member of the record itself.
template <auto kMember>
inline constexpr auto At = &internal::InRecord<kMember>;

// Inclusive bounds of a number, count or duration (in milliseconds) key.
struct Range {
  double min;
  double max;
};

// A rule beyond the type's: "" when the value is fine, else what is wrong with it.
using Validator = std::string (*)(std::string_view value);

// What a row says about reading its value, without the record's type.
struct ValueRule {
  std::string_view name;
  KeyType type;
  std::optional<Range> range;
  std::string_view fix;
  Validator validate;
  std::string_view zero_word;
};

template <typename R>
struct Key {
  std::string_view name;  // as documented; matched case-insensitively unless a parser says so
  KeyType type;
  Field<R> field;
  Section section = Section::kNone;
  std::string_view doc;  // one line: the "meaning" column of the docs
  std::optional<Range> range = std::nullopt;
  // Replaces the message for a value this key refuses; {value} is the value and
  // {error} what the type, validator or reader said. Empty: the type's own message.
  std::string_view fix = {};
  // A rule beyond the type's (empty = fine, else what is wrong with the value);
  // replaces the type's validator.
  Validator validate = nullptr;
  std::string_view zero_word = {};    // a word that stands for 0, e.g. "auto"
  std::string_view default_doc = {};  // the docs' default where the field's says too little
  // The value's form where the docs show one ("dev[:port][@Gb/s]"): the docs'
  // first column then reads name=syntax.
  std::string_view syntax = {};

  ValueRule Rule() const { return {name, type, range, fix, validate, zero_word}; }
};

// `value` read as the row says into a field of type T. The message of an error
// says what is wrong with the value (the row's fix, when it has one); callers add
// where and which key. A row whose type does not fit T is an internal error.
template <typename T>
Result<T> ReadValue(const ValueRule& rule, std::string_view value);

// A reader's refusal of `value`, worded by the row's fix when it has one.
Status RefuseValue(const ValueRule& rule, std::string_view value, std::string_view message);

// A row whose field does not hold what its type reads: a bug in the table.
Status FieldMismatch(const ValueRule& rule);

// `value` as the docs show a field's default.
template <typename T>
std::string ShowDefault(const ValueRule& rule, const T& value);

// Reads `value` into the key's field of `record`, checked as the row says.
template <typename R>
Status ApplyKey(const Key<R>& key, std::string_view value, R& record) {
  const ValueRule rule = key.Rule();
  return std::visit(
      [&](auto field) -> Status {
        if constexpr (std::is_same_v<decltype(field), Reader<R>>) {
          if (key.type != KeyType::kCustom || field == nullptr)
            return FieldMismatch(rule);
          Status read = field(value, record);
          return read.ok() ? read : RefuseValue(rule, value, read.message());
        } else {
          using T = std::remove_reference_t<decltype(field(record))>;
          Result<T> read = ReadValue<T>(rule, value);
          if (!read.ok())
            return read.status();
          field(record) = std::move(*read);
          return Status::Ok();
        }
      },
      key.field);
}

// A whole number in [lo, hi], decimal or hex after 0x: how a kCount value reads.
template <std::unsigned_integral U>
Result<U> ParseCount(std::string_view value, U lo = 0, U hi = std::numeric_limits<U>::max()) {
  if (value.starts_with("0x") || value.starts_with("0X"))
    return text::ParseInt<U>(value.substr(2), lo, hi, 16);
  return text::ParseInt<U>(value, lo, hi);
}

enum class KeyCase { kIgnored, kExact };

// The row of `name`, or null.
template <typename R>
const Key<R>* FindKey(std::span<const Key<R>> table, std::string_view name,
                      KeyCase match = KeyCase::kIgnored) {
  for (const Key<R>& key : table) {
    if (match == KeyCase::kExact ? key.name == name : KeyEquals(key.name, name))
      return &key;
  }
  return nullptr;
}

// The names of the rows, in the table's order.
template <typename R>
std::vector<std::string_view> KeyNames(std::span<const Key<R>> table) {
  std::vector<std::string_view> names;
  for (const Key<R>& key : table)
    names.push_back(key.name);
  return names;
}

// The default of `key` as the docs show it: its default_doc, else the field's
// value in a default-constructed record (the record holds the only copy of every
// default).
template <typename R>
std::string DefaultDoc(const Key<R>& key) {
  if (!key.default_doc.empty())
    return std::string(key.default_doc);
  R defaults;
  return std::visit(
      [&](auto field) -> std::string {
        if constexpr (std::is_same_v<decltype(field), Reader<R>>) {
          return ShowDefault(key.Rule(), std::monostate{});
        } else {
          return ShowDefault(key.Rule(), field(defaults));
        }
      },
      key.field);
}

// The docs' table of keys: a header ("| key | default | meaning |", with
// `first_column` for "key") and one row per key.
std::string KeysMarkdownHeader(std::string_view first_column);
std::string KeyMarkdownRow(std::string_view name, std::string_view syntax,
                           std::string_view default_doc, std::string_view doc);

template <typename R>
std::string KeyMarkdownRow(const Key<R>& key) {
  return KeyMarkdownRow(key.name, key.syntax, DefaultDoc(key), key.doc);
}

template <typename R>
std::string KeysMarkdown(std::span<const Key<R>> table, std::string_view first_column = "key") {
  std::string out = KeysMarkdownHeader(first_column);
  for (const Key<R>& key : table)
    out += KeyMarkdownRow(key);
  return out;
}

}  // namespace k8sbridge::conf
