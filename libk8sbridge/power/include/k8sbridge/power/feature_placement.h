// Resume with features: before a worker pod whose jobs asked for features is
// created, is there a Kubernetes node that can take it? When none can (no node has
// the labels, or every such node's GPUs are taken), the node fails fast through
// slurm::Slurm::Fail with "k8sbridge: no Kubernetes node offers ...", the job is
// requeued and stays pending, and it never runs on other hardware. docs/features.md.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

// The Kubernetes nodes and the GPUs pods hold on them, read once from two lists and
// then asked for every pod of a resume call: each node's labels are parsed once, the
// GPUs in use are summed once, and the nodes a placement (nodeSelector and required
// node affinity) matches are found once per distinct placement. A pod's check is
// then a walk over the nodes its placement matches, not over every node and pod of
// the cluster: a 1000-node resume in a 10,000-node cluster costs one pass over each
// list, not ten million. Check may be called from several threads at once.
class PlacementIndex {
 public:
  // `nodes`: Node objects; `pods`: the pods whose GPUs count as taken.
  PlacementIndex(std::string_view gpu_resource, const std::vector<kube::Object>& nodes,
                 const std::vector<kube::Object>& pods);
  // As FeaturePlacementPossible below.
  Status Check(const kube::Object& pod) const;

 private:
  struct NodeInfo {
    std::string name;
    std::map<std::string, std::string> labels;
    bool schedulable = false;  // Ready and not cordoned
    double allocatable = -1;   // of the GPU resource; -1 unreadable
  };
  struct PodUse {
    std::string node;
    double gpus = 0;
  };
  // The indices of the nodes whose labels satisfy `pod`'s placement.
  const std::vector<size_t>& Matching(const kube::Object& pod) const;

  std::string gpu_resource_;
  std::vector<NodeInfo> nodes_;
  std::map<std::string, double, std::less<>> used_;  // node -> GPUs of its live pods
  std::map<std::string, PodUse, std::less<>> uses_;  // "namespace/name" -> what it holds
  mutable std::mutex mu_;
  // Placement (its JSON) -> Matching's answer; entries are never removed, so a
  // reference stays valid.
  mutable std::map<std::string, std::vector<size_t>, std::less<>> matching_;
};

// One list of the Kubernetes nodes and of this cluster's worker pods per resume
// call, taken when the first pod with features needs it and shared by every node of
// the call: a resume of 1000 nodes makes two list requests, not two thousand. The
// pods are those in `ns` with OwnedPodsSelector(cluster) (the RBAC of
// container/rbac.yaml); other pods' GPU use is left to Kubernetes' scheduler.
class PlacementSnapshot {
 public:
  // The index of the lists, or why they could not be read (the same answer for
  // every caller).
  const Result<std::shared_ptr<const PlacementIndex>>& Get(kube::Client& client,
                                                           std::string_view ns,
                                                           std::string_view cluster,
                                                           std::string_view gpu_resource);

 private:
  std::once_flag once_;
  Result<std::shared_ptr<const PlacementIndex>> index_ = Status::Internal("not read");
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
// passes this cluster's worker pods). One check: PlacementIndex for many.
Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods);

}  // namespace k8sbridge::power
