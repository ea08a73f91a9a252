// Taints, tolerations and node readiness as the scheduler, the node lifecycle
// controller and the taint manager of kubesim share them.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace kubesim {

// The taint keys Kubernetes' controllers own (k8s.io/api/core/v1 well_known_taints.go).
inline constexpr const char* kTaintNotReady = "node.kubernetes.io/not-ready";
inline constexpr const char* kTaintUnreachable = "node.kubernetes.io/unreachable";
inline constexpr const char* kTaintUnschedulable = "node.kubernetes.io/unschedulable";
inline constexpr const char* kTaintOutOfService = "node.kubernetes.io/out-of-service";

struct Taint {
  std::string key, value, effect;
};

// spec.taints of a node.
std::vector<Taint> NodeTaints(const rapidjson::Value& node);

// Toleration.ToleratesTaint: an empty effect matches every effect, an empty key with
// operator Exists every key; Exists ignores the value, Equal (the default) compares it.
bool Tolerates(const rapidjson::Value& toleration, const Taint& taint);

// The first of the pod's tolerations that tolerates `taint`, or nullptr.
const rapidjson::Value* MatchingToleration(const rapidjson::Value& pod, const Taint& taint);
inline bool PodTolerates(const rapidjson::Value& pod, const Taint& taint) {
  return MatchingToleration(pod, taint) != nullptr;
}

// The status of the node's Ready condition ("True", "False", "Unknown"), or "" when the
// node reports none.
std::string NodeReadyStatus(const rapidjson::Value& node);

// True when the pod's Ready condition is True (podutil.IsPodReady).
bool PodIsReady(const rapidjson::Value& pod);

}  // namespace kubesim
