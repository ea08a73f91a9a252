// Resume with changeable features (the Feature= names of k8sbridge.conf): which of
// a resumed node's active features Slurm may keep before its pod exists.
//
// At registration slurmctld checks that slurmd reports every changeable feature the
// node has active, and sets the node DOWN (its job requeued) when it does not. A
// node whose Features= are all changeable has no active features in slurmctld after
// a fresh start or a power-down (NULL), and slurmctld takes its available features
// as active when slurmd registers: with Features=h100,a100 a pod that lands on an
// H100 node reports h100 alone and is refused. Only the features the pod's
// placement requires are sure to be reported, so k8sbridge-power drops the other
// changeable ones first thing in the resume (docs/features.md, "Active features at
// resume").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/power/resume_file.h"

namespace k8sbridge::power {

// The features slurm_update_node's features_act takes for "none": a list that
// names no feature. node_features/k8s's node_xlate, like Slurm's own helpers
// plugin, keeps the node's features for an empty string (nothing reported), and
// turns a list without names into no active changeable feature.
inline constexpr std::string_view kNoActiveFeatures = ",";

// The changeable features every Kubernetes node the pod may go to has: those in
// every alternative of one of the jobs' constraints (each constraint must hold, so
// one job's is enough). A constraint that does not parse gives none (its pod is
// refused when it is rendered).
std::vector<std::string> PlacedFeatures(const conf::BridgeConfig& config,
                                        const std::vector<const ResumeJob*>& jobs);

struct ActiveFeaturesChange {
  std::string active;                // for features_act: kNoActiveFeatures when none
  std::vector<std::string> dropped;  // the changeable features no longer active
};

// The node's active features with every changeable one that is not in `placed`
// dropped; nullopt when none is. `active` "" is read as `available`: what
// slurmctld compares with at registration when it holds none (and a node it holds
// with "" gets the same change again, which changes nothing).
std::optional<ActiveFeaturesChange> ActiveFeaturesAtResume(const conf::BridgeConfig& config,
                                                           std::string_view available,
                                                           std::string_view active,
                                                           const std::vector<std::string>& placed);

}  // namespace k8sbridge::power
