// Kubernetes node labels as Slurm node features (node_features/k8s, docs/features.md).
//
// Two sources, both in k8sbridge.conf:
//  - Feature=<name> Selector=<k=v,...> lines: the feature is active on a node whose
//    labels satisfy the selector. These are Slurm's *changeable* features: a CLOUD
//    node may be resumed "into" one, and power_k8s then places its pod with the same
//    selector. This is the mapping power_k8s already uses for placement.
//  - FeatureLabelPrefix=<prefix>: a label "<prefix><name>=true" (node-feature-
//    discovery style) reports the plain feature <name>; it is the reverse of the
//    pass-through power_k8s applies to features without a Feature= line.
//
// The functions here are pure: the Slurm ABI (plugins/node_features_k8s) and the
// sync daemon call them with strings and label maps.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/status.h"

namespace k8sbridge::features {

using Labels = std::map<std::string, std::string, std::less<>>;

// A feature name that Slurm's --constraint parser reads back as one name: a letter
// or '_' first, then letters, digits, '_', '.', '-'. Stricter than the Feature=
// check at config load, because label names come from outside.
bool IsPassThroughFeatureName(std::string_view name);

// True if `labels` satisfy every requirement (In, NotIn, Exists, DoesNotExist).
bool SelectorMatches(const std::vector<conf::LabelRequirement>& selector, const Labels& labels);

struct NodeFeatures {
  std::vector<std::string> mapped;       // Feature= names whose selector matched, conf order
  std::vector<std::string> passthrough;  // from "<prefix><name>=true" labels, sorted
  // Labels under the prefix that give no feature: "<label>=<value>: <why>", for the log.
  std::vector<std::string> skipped;
  // mapped, then passthrough, without duplicates.
  std::vector<std::string> All() const;
};
NodeFeatures FeaturesFromLabels(const conf::BridgeConfig& config, const Labels& labels);

// "a=b,c!=d,e,!f": a selector as k8sbridge.conf writes it, for scontrol show config.
std::string SelectorText(const std::vector<conf::LabelRequirement>& selector);

// Slurm's changeable features are exactly the Feature= names.
bool IsChangeable(const conf::BridgeConfig& config, std::string_view feature);
// Slurm 26.05's job_features_need_reboot: does booting a node into `features` (a job's
// constraint or job_xlate's list) change a changeable feature, that is, need a new pod?
// An unparsable list counts as needing one (Slurm's own default without a plugin).
bool AnyChangeable(const conf::BridgeConfig& config, std::string_view features);

// "a,b,,c" -> {a,b,c} (empty items dropped, order and duplicates kept).
std::vector<std::string> SplitFeatures(std::string_view list);
// {a,b} -> "a,b" without duplicates (first occurrence wins).
std::string JoinFeatures(const std::vector<std::string>& features);

// node_xlate: the node's new feature string from one that carries `new_features`
// (a registration, or the features a node is resumed into) and its current
// `orig_features`: new_features plus every non-changeable feature of the original,
// new ones first. Empty new: the original unchanged; empty original: the new ones.
// So slurm.conf's plain features stay as configured and changeable ones follow the
// hardware.
std::string MergeNodeFeatures(std::string_view new_features, std::string_view orig_features,
                              const std::function<bool(std::string_view)>& is_changeable);

// job_valid: a constraint is refused (with a message naming the features and the
// fix) when a changeable feature appears with a count ("h100*2") or a matching OR
// ("[h100|a100]"), which one pod's placement cannot honour, or when every
// alternative asks for changeable features that no single Kubernetes node can have
// at once (their selectors need different values of one label, "h100&a100").
Status ValidateJobFeatures(const conf::BridgeConfig& config, std::string_view job_features);

// job_xlate: the changeable features a node must be resumed into for the job: those
// of the first alternative of the constraint that one node can satisfy,
// comma-separated; "" when it needs none.
std::string BootFeatures(const conf::BridgeConfig& config, std::string_view job_features);

// For the sync daemon (live label changes; see docs/features.md): the feature
// strings to send with slurm_update_node() when a Kubernetes node's labels change
// from `old_labels` to `new_labels` under a running Slurm node whose current
// features are `available` and `active`. Features the old labels gave and the new
// ones do not are removed; the new ones are added; everything else (slurm.conf's
// features) stays. `changed` is false when nothing needs sending.
struct FeatureUpdate {
  std::string available;
  std::string active;
  bool changed = false;
};
FeatureUpdate RelabelUpdate(const conf::BridgeConfig& config, const Labels& old_labels,
                            const Labels& new_labels, std::string_view available,
                            std::string_view active);
// The same from the feature lists the old and the new labels give.
FeatureUpdate ReplaceLabelFeatures(const std::vector<std::string>& before,
                                   const std::vector<std::string>& after,
                                   std::string_view available, std::string_view active);

}  // namespace k8sbridge::features
