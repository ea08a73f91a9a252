// k8sbridge.conf: the one configuration file of every k8sbridge program and plugin,
// beside slurm.conf, in slurm.conf's style. docs/power.md is the reference and
// conf-templates/k8sbridge.conf the documented example.
//
//   ClusterName=hpc1                      # required: label k8sbridge.io/cluster
//   Kubeconfig=/etc/slurm/k8sbridge/kubeconfig   # or InCluster=yes
//   Namespace=slurm  QPS=50  Burst=100  Concurrency=32
//   NodeGroup=gpu Nodes=w-[0-7] PodTemplate=worker.yaml PlacementLabel=... Gpus=8
//             RuntimeClass=nvidia
//   NodeGroup=leaf0 Nodes=w-[8-15] PodTemplate=worker.yaml PlacementDomain=leaf-0
//   Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
//
// A line whose first key is NodeGroup or Feature is a record with its own keys
// (like slurm.conf's NodeName lines); every other line holds global Key=Value pairs.
// Every error names "<file>:<line>:<column>", the key, and the fix. A component
// that needs a new key adds a row to the key table (conf_keys.cpp) and a field to
// its section below; the reference tables in docs/power.md and docs/sync.md are
// rendered from the table (a unit test checks them). Unknown keys are errors, so a
// typo never goes unnoticed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/status.h"

namespace k8sbridge::conf {

enum class PlacementAffinity { kNone, kPreferred, kRequired };
std::string_view PlacementAffinityName(PlacementAffinity a);

// One requirement of a Kubernetes node selector: key=value (In), key!=value
// (NotIn), key (Exists), !key (DoesNotExist).
struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kExists;
  std::string value;  // for kIn/kNotIn
  friend bool operator==(const LabelRequirement&, const LabelRequirement&) = default;
};
std::string_view OperatorName(LabelRequirement::Op op);  // "In", "NotIn", ...

// Parses "a=b,c,!d,e!=f". Errors say which requirement is wrong and why.
Result<std::vector<LabelRequirement>> ParseLabelSelector(std::string_view text);

struct NodeGroup {
  std::string name;
  std::string nodes_expression;    // as written
  std::vector<std::string> nodes;  // expanded
  std::string pod_template;        // path; relative ones resolved against the conf's directory
  std::optional<int> gpus;         // overrides the GPU count from the node's Gres
  std::string runtime_class;       // the pods' spec.runtimeClassName; "" = the template's
  std::string placement_label;     // effective (group's, else the global one); "" = none
  PlacementAffinity placement_affinity = PlacementAffinity::kRequired;  // effective
  // PlacementDomain: the value placement_label has on every Kubernetes node the
  // group's pods may run on (a leaf, a block); "" = the group is not pinned. A
  // pinned group's place in the fabric is known before any pod runs, so Slurm's
  // topology holds for its powered-down nodes too.
  std::string placement_domain;
  int line = 0;
};

struct FeatureMapping {
  std::string feature;  // Slurm feature name (case-sensitive, as Slurm compares them)
  std::vector<LabelRequirement> selector;
  int line = 0;
};

// The sections of BridgeConfig, one per component. Each default is written once,
// here: the parser, the key table's documentation (conf_keys.h) and the sync
// daemon's ReconcileOptions read it from these initializers.

// The Kubernetes connection. Neither Kubeconfig nor InCluster: in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config.
struct KubeConf {
  std::string kubeconfig;  // relative ones resolved against the conf's directory
  std::string context;     // KubeContext; "" = the kubeconfig's current-context
  bool in_cluster = false;
  // AllowInsecureHttp=yes: accept an http:// server in the kubeconfig (the bearer
  // token then travels in clear); for test API servers only.
  bool allow_insecure_http = false;
  std::string namespace_ = "default";
  double qps = 50;
  int burst = 100;
  int concurrency = 32;  // pod requests in flight at once
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{10'000};
  // How long 429/5xx answers are retried before a node is given up; must stay well
  // inside Slurm's ResumeTimeout.
  std::chrono::milliseconds retry_deadline{20'000};
};

// The power programs (k8sbridge-power resume/suspend/resume-fail).
struct PowerConf {
  // Their log, besides stderr (which slurmscriptd discards); "" = none.
  std::string log_file;
  // Where they count their runs (power/counters.h) for k8sbridge-sync to serve; "" = nowhere.
  std::string metrics_file;
  // The resume step encodes a munge credential with the controller's munged and
  // the worker decodes it before starting slurmd, so a pod with the wrong munge
  // key fails at once with a clear status instead of never registering.
  bool munge_check = true;
  std::string munge_socket;  // the controller's munged; "" = libmunge's default
  std::string gpu_resource = "nvidia.com/gpu";
  std::string placement_label;  // global default for node groups
  PlacementAffinity placement_affinity = PlacementAffinity::kRequired;
};

// The sync daemon, k8sbridge-sync (docs/sync.md). Keys Sync*.
struct SyncConf {
  // Drain reasons that make k8sbridge cordon and taint the Kubernetes node
  // (ECMAScript regular expression, case-insensitive, searched in the reason).
  std::string hardware_reason = R"(^\s*(\[hardware\]|xid|ecc|nvlink))";
  std::chrono::milliseconds unschedulable_grace{20'000};
  // A pod whose Slurm node is POWERED_DOWN or unknown, or a POWERING_UP node
  // without a pod, is acted on after this long.
  std::chrono::milliseconds orphan_grace{60'000};
  // A POWERING_UP node whose pod has been Running and Ready this long has lost its
  // slurmd's registration (slurmctld restarted without saving it) and is failed.
  std::chrono::milliseconds registration_grace{120'000};
  // After k8sbridge-sync could not read Kubernetes or Slurm, or took the lead, a
  // lost Kubernetes node fails no Slurm node for this long: in an API outage the
  // kubelets could not post either, and the node controller may call a live node
  // lost until they post again (every 10 s by default).
  std::chrono::milliseconds outage_hold{30'000};
  int breaker_threshold = 3;  // unschedulable failures of one group within the cool-down; 0 = off
  std::chrono::milliseconds breaker_cooldown{600'000};
  std::string lease_name;  // "" = k8sbridge-sync-<ClusterName>
  std::chrono::milliseconds lease_duration{15'000};
  std::string metrics_listen = "127.0.0.1:9109";  // "" = no Prometheus endpoint
  std::chrono::milliseconds poll_interval{500};   // slurm_load_node with change detection
  // Destructive actions (pod deletes, fails, drains) one pass may take; more and
  // it takes none of them. 0 = auto: 10% of the Slurm nodes, at least 20.
  int max_actions_per_pass = 0;
  // Slurm 25.05+: the tree topology in which a resumed node of an unpinned group is
  // registered under the leaf its pod landed on; "" = none.
  std::string topology;
};

// Slurm features as Kubernetes node labels (power placement, node_features/k8s,
// the sync daemon's relabels).
struct FeatureConf {
  // Unmapped Slurm features pass through as node label "<prefix><feature>=true";
  // "" = unmapped features only constrain Slurm, not the pod.
  std::string label_prefix;
  // node_features/k8s in slurmd: how long registration waits for the node's labels
  // before it uses the cache file, and where that file is ("" = beside slurmd's
  // spool: <SlurmdSpoolDir>/k8sbridge-labels.json; %n = the Slurm node name).
  std::chrono::milliseconds label_timeout{2'000};
  std::string cache_file;
};

// What a worker pod runs.
struct WorkerConf {
  std::string command = "/usr/sbin/k8sbridge-worker";
  std::string
      conf_server;  // host[:port] of slurmctld for configless slurmd; "" = pod has slurm.conf
};

struct BridgeConfig {
  std::string file;  // where it was read from, for messages
  std::string cluster_name;

  KubeConf kube;
  PowerConf power;
  SyncConf sync;
  FeatureConf node_features;
  WorkerConf worker;

  std::vector<NodeGroup> node_groups;
  std::vector<FeatureMapping> features;

  // The group of `node`, or null. O(1): a hash index from node name to group,
  // built by ParseBridgeConfig (a resume or sync pass looks up every node).
  const NodeGroup* GroupOf(std::string_view node) const;
  // Rebuilds that index; only for code that changes node_groups after parsing.
  void IndexNodeGroups();
  const FeatureMapping* MappingOf(std::string_view feature) const;

 private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Node name -> index in node_groups (an index, not a pointer: the config is copied
  // and moved).
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> group_index_;
};

// Parses the text of k8sbridge.conf; `file` names it in messages and anchors
// relative PodTemplate paths.
Result<BridgeConfig> ParseBridgeConfig(std::string_view text, std::string_view file,
                                       const Hostlists& hostlists);
// Reads and parses `path`.
Result<BridgeConfig> LoadBridgeConfig(const std::string& path, const Hostlists& hostlists);
// $K8SBRIDGE_CONF, else /etc/slurm/k8sbridge.conf.
std::string DefaultConfigPath();

// Every key this parser knows, for "did you mean" and for docs.
const std::vector<std::string_view>& GlobalKeys();
const std::vector<std::string_view>& NodeGroupKeys();
const std::vector<std::string_view>& FeatureKeys();

}  // namespace k8sbridge::conf
