// The key table of k8sbridge.conf, in the style of Slurm's s_p_options_t: one row
// per key says its name, how its value is read (type, range, validator), which
// field of which section it fills, and one line of documentation. The parser
// (bridge_conf.cpp), its messages, GlobalKeys()/NodeGroupKeys()/FeatureKeys() and
// the reference tables in docs/power.md and docs/sync.md all come from it.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/status.h"

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
};

// The component a key configures: the section of BridgeConfig it fills, or the
// record line (NodeGroup=, Feature=) it belongs on.
enum class Section { kCluster, kKube, kPower, kSync, kFeatures, kWorker, kNodeGroup, kFeature };

// Where a key stores its value in record R (BridgeConfig, NodeGroup or
// FeatureMapping). Rows name it as In<&section, &member> or At<&member>.
template <typename R>
using Field =
    std::variant<std::string& (*)(R&), bool& (*)(R&), int& (*)(R&), std::optional<int>& (*)(R&),
                 double& (*)(R&), std::chrono::milliseconds& (*)(R&), PlacementAffinity& (*)(R&),
                 std::vector<LabelRequirement>& (*)(R&)>;

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

// Inclusive bounds of an int, double or duration (in milliseconds) key.
struct Range {
  double min;
  double max;
};

template <typename R>
struct Key {
  std::string_view name;  // as documented; matched case-insensitively
  KeyType type;
  Field<R> field;
  Section section;
  std::string_view doc;  // one line: the "meaning" column of the docs
  std::optional<Range> range = std::nullopt;
  // Replaces the message for a value this key refuses; {value} is the value and
  // {error} what the type or validator said. Empty: the type's own message.
  std::string_view fix = {};
  // A rule beyond the type's (empty = fine, else what is wrong with the value);
  // replaces the type's validator.
  std::string (*validate)(std::string_view value) = nullptr;
  std::string_view zero_word = {};    // a word that stands for 0, e.g. "auto"
  std::string_view default_doc = {};  // the docs' default where the field's says too little
};

// The rows, in the order the docs list them.
std::span<const Key<BridgeConfig>> GlobalKeyTable();
std::span<const Key<NodeGroup>> NodeGroupKeyTable();
std::span<const Key<FeatureMapping>> FeatureKeyTable();

// Reads `value` into the key's field of `record`, checked as the row says. The
// message says what is wrong with the value; callers add where and which key.
Status ApplyKey(const Key<BridgeConfig>& key, std::string_view value, BridgeConfig& record);
Status ApplyKey(const Key<NodeGroup>& key, std::string_view value, NodeGroup& record);
Status ApplyKey(const Key<FeatureMapping>& key, std::string_view value, FeatureMapping& record);

// The global keys of `sections` as the markdown table of the docs
// ("| key | default | meaning |"), one row per key, defaults taken from the
// section structs.
std::string GlobalKeysMarkdown(const std::vector<Section>& sections);

}  // namespace k8sbridge::conf
