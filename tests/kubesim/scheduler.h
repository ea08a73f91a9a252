// The kubesim scheduler: binds pending pods to nodes the way kube-scheduler's default
// filter plugins would, and explains a failure with kube-scheduler's own message.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
//
// The placement logic (FilterNode, Schedule) is pure: it reads pod and node objects as
// RapidJSON values and never touches the store, so unit tests drive it directly. The
// Scheduler class is the loop around it: it watches the store and binds.
#pragma once

#include "quantity.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "store.h"

namespace kubesim {

// Resource name -> amount in milli-units ("cpu", "memory", "nvidia.com/gpu", ...).
using ResourceList = std::map<std::string, int64_t>;

// What a pod asks for: the sum over its containers, at least the largest init
// container, plus spec.overhead. A container's requests default to its limits (as the
// API server's defaulting does). Unparsable quantities are kInvalidArgument.
Result<ResourceList> PodRequests(const rapidjson::Value& pod);

// The cluster as the filters see it: every node, and the pods bound to nodes that still
// hold resources (not Succeeded or Failed; terminating pods still count, as in
// kube-scheduler).
struct ClusterView {
  std::vector<const rapidjson::Value*> nodes;
  std::vector<const rapidjson::Value*> pods;
};

// Why `node` cannot take `pod`, in kube-scheduler's words ("Insufficient cpu",
// "node(s) had untolerated taint {key: value}", ...). Empty when it fits. As in
// kube-scheduler, the first failing filter decides (several "Insufficient ..." reasons
// may come from the resources filter). Order: NodeUnschedulable, TaintToleration,
// NodeAffinity (nodeSelector and required node affinity), NodeResourcesFit,
// InterPodAffinity.
std::vector<std::string> FilterNode(const rapidjson::Value& pod, const rapidjson::Value& node,
                                    const ClusterView& cluster);

struct ScheduleDecision {
  std::optional<std::string> node;  // set when a node fits
  // When no node fits: kube-scheduler's FitError text, for example
  // "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match
  // Pod's node affinity/selector."
  std::string message;
};

// Runs the filters over every node and picks, among the nodes that fit, the least
// allocated one (mean free share of cpu and memory after placing the pod, as the
// default NodeResourcesFit LeastAllocated score), ties broken by node name.
// kube-scheduler breaks ties at random; kubesim is deterministic on purpose.
ScheduleDecision Schedule(const rapidjson::Value& pod, const ClusterView& cluster);

// kube-scheduler's message for a pod no node fits: "0/N nodes are available: " then
// "<count> <reason>" sorted as strings and joined with ", ", then ".".
std::string FitErrorMessage(size_t node_count,
                            const std::vector<std::vector<std::string>>& reasons_per_node);

// True when this scheduler should place the pod: not bound, not terminating, not
// finished, schedulerName empty or `scheduler_name`.
bool NeedsScheduling(const rapidjson::Value& pod, const std::string& scheduler_name);

// The scheduling loop over a Store. Start() runs it on a thread that wakes on every
// change to pods or nodes (and at least every `resync`), so an Unschedulable pod is
// retried when the cluster changes, as kube-scheduler's queue does.
// Records a core/v1 Event about a pod (best effort, as components do): `component`
// is source.component and reportingComponent, `host` source.host, `field_path` the
// involvedObject's fieldPath (spec.containers{c} for a container's events).
void RecordPodEvent(Store& store, const std::string& ns, const std::string& name,
                    const std::string& uid, const std::string& type, const std::string& reason,
                    const std::string& message, const std::string& component,
                    const std::string& host = "", const std::string& field_path = "");

class Scheduler {
 public:
  struct Options {
    std::string scheduler_name = "default-scheduler";
    std::chrono::milliseconds resync{1000};
  };
  Scheduler(Store& store, k8sbridge::Logger& log, Options options);
  Scheduler(Store& store, k8sbridge::Logger& log) : Scheduler(store, log, Options()) {}
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void Start();
  void Stop();

  // One pass over every pod that needs scheduling, in creation order (then name).
  // Returns how many pods were bound. Tests call it directly instead of Start().
  int RunOnce();

 private:
  void Loop();
  // Writes PodScheduled=False/Unschedulable (and a FailedScheduling event when the
  // message changed). Returns false when the pod is gone or changed under us.
  void MarkUnschedulable(const rapidjson::Value& pod, const std::string& message);
  void MarkSchedulingGated(const rapidjson::Value& pod);
  void RecordEvent(const rapidjson::Value& pod, const std::string& type, const std::string& reason,
                   const std::string& message);

  Store& store_;
  k8sbridge::Logger& log_;
  Options options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kubesim
