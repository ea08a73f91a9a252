// Resume with features: before a worker pod whose jobs asked for features is
// created, is there a Kubernetes node that can take it? When none can (no node has
// the labels, or every such node's GPUs are taken), the node fails fast through
// slurm::Slurm::Fail with "k8sbridge: no Kubernetes node offers ...", the job is
// requeued and stays pending, and it never runs on other hardware. docs/features.md.
#pragma once

#include <mutex>
#include <string_view>
#include <vector>

#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

// One list of the Kubernetes nodes and of this cluster's worker pods per resume
// call, taken when the first pod with features needs it and shared by every node of
// the call: a resume of 1000 nodes makes two list requests, not two thousand. The
// pods are those in `ns` with OwnedPodsSelector(cluster) (the RBAC of
// container/rbac.yaml); other pods' GPU use is left to Kubernetes' scheduler.
class PlacementSnapshot {
 public:
  // The lists, or why they could not be read (the same answer for every caller).
  const Result<std::pair<std::vector<kube::Object>, std::vector<kube::Object>>>& Get(
      kube::Client& client, std::string_view ns, std::string_view cluster);

 private:
  std::once_flag once_;
  Result<std::pair<std::vector<kube::Object>, std::vector<kube::Object>>> lists_ =
      Status::Internal("not read");
};

// OK when `pod` asks for no features (no k8sbridge.io/features annotation), when
// some Ready, schedulable Kubernetes node satisfies its nodeSelector and required
// node affinity and has the GPUs it requests free, or when Kubernetes cannot be
// asked (then Kubernetes' scheduler decides: never fail a node on a guess).
// kUnavailable, naming the features and what was found, otherwise.
Status CheckFeaturePlacement(const PowerContext& ctx, PlacementSnapshot& snapshot,
                             std::string_view node, const kube::Object& pod);

// The same test on given lists, for tests and for callers that already hold them:
// `nodes` are Node objects, `pods` the pods whose GPUs count as taken (the resume
// passes this cluster's worker pods).
Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods);

}  // namespace k8sbridge::power
