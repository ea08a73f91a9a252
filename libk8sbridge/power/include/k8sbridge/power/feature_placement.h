// Resume with features: before a worker pod whose jobs asked for features is
// created, is there a Kubernetes node that can take it? When none can (no node has
// the labels, or every such node's GPUs are taken), the node fails fast through
// slurm::Slurm::Fail with "k8sbridge: no Kubernetes node offers ...", the job is
// requeued and stays pending, and it never runs on other hardware. docs/features.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/power_context.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

// How the placement check reads Kubernetes: the same search runs on a client
// (PlacementSnapshot) and on lists a caller already holds (FeaturePlacementPossible).
struct PlacementReads {
  // One page of the Nodes that `label_selector` selects ("" every node), from
  // `continue_token` ("" the first page). A reader may return more nodes than the
  // selector selects: every node is matched again against the pod.
  std::function<Result<kube::ObjectList>(const std::string& label_selector,
                                         const std::string& continue_token)>
      node_page;
  // The pods whose GPUs count as taken that are bound to `node` ("": on every node).
  std::function<Result<std::vector<kube::Object>>(const std::string& node)> pods;
};

// What PlacementSearch::Check found.
struct PlacementVerdict {
  Status placement;     // OK, or kUnavailable naming the features and what was found
  Status read_failure;  // not OK: Kubernetes could not be read (`placement` is then OK)
};

// Is there a Kubernetes node for a pod with features? Asked for every pod of a
// resume call, it reads only what it needs, once per call: the nodes a placement
// (nodeSelector and required node affinity) selects, page by page, stopping at the
// first node that fits; and the GPUs held on each node it looks at, one small read
// per node (the first node alone, then kPodReadBatch of the next nodes side by side),
// or one read of every pod once it has read kPerNodePodReads nodes.
// A 1000-node resume in a 10,000-node cluster whose first node fits costs one page
// of nodes and one read of that node's pods, not the whole cluster twice (docs/
// power.md, "Benchmark: 10,000 nodes"). Check may be called from several threads
// at once; they take turns.
class PlacementSearch {
 public:
  static constexpr int kPerNodePodReads = 16;
  static constexpr int kPodReadBatch = 8;

  PlacementSearch(std::string_view gpu_resource, PlacementReads reads);
  // As FeaturePlacementPossible; the first read failure answers every later check.
  PlacementVerdict Check(const kube::Object& pod);

 private:
  struct NodeInfo {
    std::string name;
    std::map<std::string, std::string> labels;
    bool schedulable = false;  // Ready and not cordoned
    double allocatable = -1;   // of the GPU resource; -1 unreadable
  };
  struct PodUse {
    std::string key;  // "namespace/name"
    double gpus = 0;
  };
  // The nodes of one placement read so far, and where its next page starts.
  struct Cursor {
    std::string selector;
    std::vector<size_t> matching;  // indices into nodes_
    std::string next;
    bool done = false;
  };
  Status ReadNodePage(Cursor& cursor, const kube::Object& pod);
  // GPUs the pods on the node cursor.matching[at] hold, but for the pod `own`
  // ("namespace/name"); reads them first when needed.
  Result<double> UsedOn(const Cursor& cursor, size_t at, const std::string& own);
  // The schedulable nodes of `cursor` from `at` on whose pods are unread: one for
  // the search's first read (the first node usually fits), else up to kPodReadBatch,
  // within kPerNodePodReads.
  std::vector<std::string> UnreadFrom(const Cursor& cursor, size_t at) const;
  Status ReadPodsOf(const std::vector<std::string>& nodes);
  Status ReadAllPods();
  // Records the GPUs `pods` hold (those on `node`; "": every node's).
  void AddPods(const std::vector<kube::Object>& pods, const std::string& node);
  Status Remember(Status failure);

  std::mutex mu_;
  std::string gpu_resource_;
  PlacementReads reads_;
  std::vector<NodeInfo> nodes_;
  std::map<std::string, size_t, std::less<>> node_index_;         // name -> nodes_
  std::map<std::string, Cursor, std::less<>> cursors_;            // placement (its JSON) ->
  std::map<std::string, std::vector<PodUse>, std::less<>> uses_;  // node -> its pods
  bool all_pods_read_ = false;
  int per_node_reads_ = 0;
  Status read_failure_;
};

// The search of one resume call on the caller's client, made when the first pod
// with features needs it and shared by every node of the call. The pods are those
// in `ns` with OwnedPodsSelector(cluster) (the RBAC of deploy/base/rbac.yaml); other
// pods' GPU use is left to Kubernetes' scheduler.
class PlacementSnapshot {
 public:
  PlacementSearch& Get(kube::Client& client, std::string_view ns, std::string_view cluster,
                       std::string_view gpu_resource);

 private:
  std::once_flag once_;
  std::unique_ptr<PlacementSearch> search_;
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
// reads this cluster's worker pods). One check: PlacementSearch for many.
Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods);

}  // namespace k8sbridge::power
