// The controllers of kube-controller-manager that decide what happens to pods when a
// node is lost, run inside kubesim against the store:
//
// - node lifecycle (pkg/controller/nodelifecycle): a node whose Ready condition is
//   False gets the node.kubernetes.io/not-ready NoSchedule and NoExecute taints, one
//   whose Ready is Unknown (its kubelet stopped posting) node.kubernetes.io/unreachable;
//   both go when Ready is True again. The pods of a node that stops being Ready get
//   Ready=False. For nodes no kubesim kubelet runs, the fault annotation
//   kubesim.k8sbridge.io/fault=NotReady makes the node "lost" (Ready=Unknown) here, as
//   the kubelet does for its own nodes.
// - taint eviction (pkg/controller/tainteviction): a pod on a node with a NoExecute
//   taint it does not tolerate is deleted at once; one that tolerates every such taint
//   for tolerationSeconds is deleted that long after the taint manager first saw it
//   there; DisruptionTarget=True, reason DeletionByTaintManager, first.
// - pod GC (pkg/controller/podgc): pods bound to a node that has been missing for the
//   quarantine time (40 s upstream) are marked Failed with DisruptionTarget (reason
//   DeletionByPodGC) and force-deleted; terminating pods on a node that is not Ready
//   and carries node.kubernetes.io/out-of-service are force-deleted.
// - disruption (pkg/controller/disruption): the status of every PodDisruptionBudget
//   (disruption.h).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "store.h"

namespace kubesim {

// On a node: "NotReady" makes the node lost (its kubelet stops posting status). The
// kubesim kubelet handles it for the nodes it runs, the node lifecycle controller for
// every other node.
inline constexpr const char* kNodeFaultAnnotation = "kubesim.k8sbridge.io/fault";

// What the node lifecycle controller writes for a node whose kubelet stopped posting.
inline constexpr const char* kNodeStatusUnknownReason = "NodeStatusUnknown";
inline constexpr const char* kNodeStatusUnknownMessage = "Kubelet stopped posting node status.";

// Adds or removes the node's not-ready / unreachable NoSchedule and NoExecute taints to
// match its Ready condition (False: not-ready, Unknown: unreachable, True or none:
// neither). NoExecute taints get timeAdded. Writes only when something changes.
Status ReconcileNodeConditionTaints(Store& store, const std::string& node);

// Sets the node's Ready condition with lastHeartbeatTime `now`, as a kubelet (or the
// node lifecycle controller, for Unknown) writes it.
void SetNodeReadyCondition(rapidjson::Document& node, const std::string& status,
                           const std::string& reason, const std::string& message,
                           const std::string& now);

// Sets Ready=False on every pod bound to `node` (MarkPodsNotReady).
void MarkPodsNotReady(Store& store, const std::string& node);

struct ControllerOptions {
  // How long a pod's node must be missing before pod GC deletes the pod (upstream's
  // quarantine, 40 s).
  std::chrono::milliseconds pod_gc_quarantine{40000};
  // The longest wait between passes (toleration deadlines are checked this often).
  std::chrono::milliseconds resync{200};
};

class Controllers {
 public:
  Controllers(Store& store, k8sbridge::Logger& log, ControllerOptions options);
  Controllers(Store& store, k8sbridge::Logger& log) : Controllers(store, log, {}) {}
  ~Controllers();
  Controllers(const Controllers&) = delete;
  Controllers& operator=(const Controllers&) = delete;

  void Start();
  void Stop();

  // One pass of every controller; tests on a FakeClock call it instead of Start().
  void RunOnce();

 private:
  void Loop();
  void NodeLifecyclePass();
  void ApiSideNodeFault(const rapidjson::Value& node);
  void TaintEvictionPass();
  void EvictForTaint(const rapidjson::Value& pod, const rapidjson::Value& node);
  void PodGcPass();
  void ForceDelete(const rapidjson::Value& pod, const char* reason, const char* message);

  Store& store_;
  k8sbridge::Logger& log_;
  ControllerOptions options_;
  std::set<std::string> lost_here_;           // nodes this controller made Unknown
  std::map<std::string, std::string> ready_;  // node -> last Ready status seen
  std::map<std::string, k8sbridge::Clock::Wall::time_point> noexecute_seen_;  // pod uid
  std::map<std::string, k8sbridge::Clock::Wall::time_point> node_missing_;    // node name
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kubesim
