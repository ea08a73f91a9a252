#include "k8sbridge/conf/conf_keys.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"

namespace k8sbridge::conf {

namespace {

// --- Validators of single keys: "" when the value is fine, else what is wrong. ---

std::string NonEmptyError(std::string_view value) {
  return value.empty() ? "it is empty" : "";
}

std::string NonEmptyLabelValueError(std::string_view value) {
  return value.empty() ? "it is empty" : LabelValueError(value);
}

std::string LabelPrefixError(std::string_view value) {
  // A prefix is good when a feature name after it makes a label key.
  std::string key = std::string(value) + "x";
  std::string error = LabelKeyError(key);
  return error.empty() ? "" : fmt::format("'{}' is not a Kubernetes label key: {}", key, error);
}

using G = BridgeConfig;

// One row per global key, in the order of docs/power.md, then docs/sync.md.
constexpr Key<G> kGlobalKeys[] = {
    {.name = "ClusterName",
     .type = KeyType::kLabelValue,
     .field = At<&G::cluster_name>,
     .section = Section::kCluster,
     .doc = "slurm.conf's ClusterName; label `k8sbridge.io/cluster` on every pod. Must be a "
            "Kubernetes label value.",
     .fix = "'{value}' cannot be a Kubernetes label value ({error}): use slurm.conf's "
            "ClusterName, which Slurm keeps lower-case",
     .validate = NonEmptyLabelValueError,
     .default_doc = "(required)"},
    {.name = "Kubeconfig",
     .type = KeyType::kString,
     .field = In<&G::kube, &KubeConf::kubeconfig>,
     .section = Section::kKube,
     .doc = "kubeconfig file (read as SlurmUser). Exclusive with `InCluster`. A relative path is "
            "resolved against the directory of k8sbridge.conf, as `PodTemplate=` is (the "
            "programs run in whatever directory slurmctld or slurmd gives them)."},
    // Plain http:// to the API server sends the bearer token in clear: refused
    // unless asked for (a test API server on loopback).
    {.name = "AllowInsecureHttp",
     .type = KeyType::kBool,
     .field = In<&G::kube, &KubeConf::allow_insecure_http>,
     .section = Section::kKube,
     .doc = "accept an `http://` server in the kubeconfig. Refused by default: the bearer token "
            "and every request would travel in clear. For a test API server only."},
    {.name = "KubeContext",
     .type = KeyType::kString,
     .field = In<&G::kube, &KubeConf::context>,
     .section = Section::kKube,
     .doc = "context in that kubeconfig",
     .default_doc = "current-context"},
    {.name = "InCluster",
     .type = KeyType::kBool,
     .field = In<&G::kube, &KubeConf::in_cluster>,
     .section = Section::kKube,
     .doc = "use the pod's service account. Neither this nor Kubeconfig: in-cluster when "
            "`KUBERNETES_SERVICE_HOST` is set, else `$KUBECONFIG` or `~/.kube/config`. slurmctld "
            "runs the power programs with `SLURM_CONF` alone in their environment: they then "
            "read `KUBERNETES_SERVICE_HOST`/`_PORT` from `/run/k8sbridge/kubernetes-service`, "
            "which `k8sbridge-entrypoint controller` writes."},
    {.name = "Namespace",
     .type = KeyType::kDnsLabel,
     .field = In<&G::kube, &KubeConf::namespace_>,
     .section = Section::kKube,
     .doc = "namespace of the worker pods, of the Events about them and of the sync daemon's "
            "Lease (DNS-1123 label)",
     .fix = "'{value}' is not a Kubernetes namespace name: {error}"},
    {.name = "QPS",
     .type = KeyType::kDouble,
     .field = In<&G::kube, &KubeConf::qps>,
     .section = Section::kKube,
     .doc = "client-side rate limit in requests per second (token bucket, as client-go)",
     .range = Range{std::numeric_limits<double>::denorm_min(), 100'000},
     .fix = "'{value}' is not a request rate: use a number above 0, e.g. 50"},
    {.name = "Burst",
     .type = KeyType::kInt,
     .field = In<&G::kube, &KubeConf::burst>,
     .section = Section::kKube,
     .doc = "requests the rate limit lets through at once; Burst ≥ QPS (an unset Burst rises to "
            "QPS)",
     .range = Range{1, 100'000}},
    {.name = "Concurrency",
     .type = KeyType::kInt,
     .field = In<&G::kube, &KubeConf::concurrency>,
     .section = Section::kKube,
     .doc = "pod requests in flight at once (1-4096)",
     .range = Range{1, 4096}},
    {.name = "ConnectTimeout",
     .type = KeyType::kDuration,
     .field = In<&G::kube, &KubeConf::connect_timeout>,
     .section = Section::kKube,
     .doc = "how long a connection to the API server may take: seconds, or `10s`, `500ms`"},
    {.name = "RequestTimeout",
     .type = KeyType::kDuration,
     .field = In<&G::kube, &KubeConf::request_timeout>,
     .section = Section::kKube,
     .doc = "how long one request may take: seconds, or `10s`, `500ms`"},
    {.name = "RetryDeadline",
     .type = KeyType::kDuration,
     .field = In<&G::kube, &KubeConf::retry_deadline>,
     .section = Section::kKube,
     .doc = "how long 429/5xx answers are retried before a node is given up; keep well under "
            "ResumeTimeout"},
    {.name = "LogFile",
     .type = KeyType::kAbsolutePath,
     .field = In<&G::power, &PowerConf::log_file>,
     .section = Section::kPower,
     .doc = "absolute path the power programs append their log to, besides stderr (slurmscriptd "
            "discards stderr); must be writable by SlurmUser",
     .fix = "'{value}' is not an absolute path: give a file SlurmUser may append to, e.g. "
            "/var/log/slurm/k8sbridge-power.log"},
    {.name = "PowerMetricsFile",
     .type = KeyType::kAbsolutePath,
     .field = In<&G::power, &PowerConf::metrics_file>,
     .section = Section::kPower,
     .doc = "absolute path where the power programs count their runs and nodes; its directory "
            "must be writable by SlurmUser. k8sbridge-sync serves the counts as "
            "`k8sbridge_power_*` metrics (docs/sync.md, \"Metrics\"); unset: nothing is counted",
     .fix = "'{value}' is not an absolute path: give a file in a directory SlurmUser may write "
            "and k8sbridge-sync may read, e.g. /var/lib/k8sbridge/power/counters"},
    {.name = "WorkerCommand",
     .type = KeyType::kAbsolutePath,
     .field = In<&G::worker, &WorkerConf::command>,
     .section = Section::kWorker,
     .doc = "absolute path of the worker entrypoint in the image",
     .fix = "'{value}' is not an absolute path: give the path of k8sbridge-worker inside the "
            "worker image, e.g. /usr/sbin/k8sbridge-worker"},
    {.name = "MungeCheck",
     .type = KeyType::kBool,
     .field = In<&G::power, &PowerConf::munge_check>,
     .section = Section::kPower,
     .doc = "resume encodes a munge credential (TTL 1 h) for each pod, which the worker decodes "
            "before slurmd starts (see \"The worker entrypoint\")"},
    {.name = "MungeSocket",
     .type = KeyType::kAbsolutePath,
     .field = In<&G::power, &PowerConf::munge_socket>,
     .section = Section::kPower,
     .doc = "socket of the controller's munged; unset: the `socket=` of slurmctld's `AuthInfo` "
            "(read with `slurm_load_ctl_conf`), else libmunge's default",
     .fix = "'{value}' is not an absolute path: give the socket of the munged that slurmctld uses "
            "(slurm.conf AuthInfo=socket=...), e.g. /run/munge/munge.socket.2",
     .default_doc = "slurmctld's"},
    {.name = "ConfServer",
     .type = KeyType::kString,
     .field = In<&G::worker, &WorkerConf::conf_server>,
     .section = Section::kWorker,
     .doc = "`host[:port]` of slurmctld for configless slurmd (`K8SBRIDGE_CONF_SERVER`)"},
    {.name = "GpuResource",
     .type = KeyType::kLabelKey,
     .field = In<&G::power, &PowerConf::gpu_resource>,
     .section = Section::kPower,
     .doc = "extended resource requested for the Gres `gpu` count"},
    {.name = "PlacementLabel",
     .type = KeyType::kLabelKey,
     .field = In<&G::power, &PowerConf::placement_label>,
     .section = Section::kPower,
     .doc = "node label of the placement domain (IB leaf, block, zone) for multi-node jobs"},
    {.name = "PlacementAffinity",
     .type = KeyType::kAffinity,
     .field = In<&G::power, &PowerConf::placement_affinity>,
     .section = Section::kPower,
     .doc = "`required`, `preferred` or `none`"},
    {.name = "FeatureLabelPrefix",
     .type = KeyType::kString,
     .field = In<&G::node_features, &FeatureConf::label_prefix>,
     .section = Section::kFeatures,
     .doc = "features without a `Feature=` line require node label `<prefix><feature>=true`",
     .fix = "'{value}' cannot start a label key: {error}; e.g. feature.k8sbridge.io/",
     .validate = LabelPrefixError},
    {.name = "FeatureLabelTimeout",
     .type = KeyType::kDuration,
     .field = In<&G::node_features, &FeatureConf::label_timeout>,
     .section = Section::kFeatures,
     .doc = "node_features_k8s in slurmd: how long registration waits for the node's labels "
            "(docs/features.md)",
     .range = Range{1, 30'000},
     .fix = "{error}: slurmd registration waits this long at most for node labels, e.g. 2s"},
    {.name = "FeatureCacheFile",
     .type = KeyType::kAbsolutePath,
     .field = In<&G::node_features, &FeatureConf::cache_file>,
     .section = Section::kFeatures,
     .doc = "node_features_k8s in slurmd: the labels it falls back to when Kubernetes does not "
            "answer in time (docs/features.md; `%n` is the Slurm node name)",
     .fix = "'{value}' is not an absolute path: give a file slurmd may write, e.g. "
            "/var/spool/slurmd/%n/k8sbridge-labels.json (%n is the Slurm node name)",
     .default_doc = "`<SlurmdSpoolDir>/k8sbridge-labels.json`"},
    // --- k8sbridge-sync (docs/sync.md) ---
    {.name = "SyncHardwareReason",
     .type = KeyType::kRegex,
     .field = In<&G::sync, &SyncConf::hardware_reason>,
     .section = Section::kSync,
     .doc = "ECMAScript regular expression, case-insensitive, searched in drain reasons: a match "
            "cordons and taints the Kubernetes node",
     .fix = "'{value}' is not a regular expression ({error}): write an ECMAScript pattern, e.g. "
            "'^(\\[hardware\\]|xid|ecc|nvlink)'"},
    {.name = "SyncUnschedulableGrace",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::unschedulable_grace>,
     .section = Section::kSync,
     .doc = "how long a pod may be Unschedulable (or stuck on an image error) before its node "
            "goes DOWN/POWER_DOWN"},
    {.name = "SyncOrphanGrace",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::orphan_grace>,
     .section = Section::kSync,
     .doc = "how long a pod may outlive its node (POWERED_DOWN or unknown), and a node stay "
            "POWERING_UP without a pod"},
    {.name = "SyncRegistrationGrace",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::registration_grace>,
     .section = Section::kSync,
     .doc = "how long a node may stay POWERING_UP while its pod is Running and Ready (its "
            "slurmd's registration was lost, e.g. by a slurmctld crash) before it goes "
            "DOWN/POWER_DOWN; keep it well under ResumeTimeout"},
    {.name = "SyncOutageHold",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::outage_hold>,
     .section = Section::kSync,
     .doc = "how long after the daemon could not read Kubernetes or Slurm (or took the lead) "
            "a lost Kubernetes node (Ready Unknown) fails none of its Slurm nodes: the "
            "kubelets could not post during an API outage either, so the node controller "
            "may call live nodes lost until they post again"},
    {.name = "SyncCircuitBreakerThreshold",
     .type = KeyType::kInt,
     .field = In<&G::sync, &SyncConf::breaker_threshold>,
     .section = Section::kSync,
     .doc = "unschedulable failures per node group that open its breaker; 0 = off",
     .range = Range{0, 10'000}},
    {.name = "SyncCircuitBreakerCooldown",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::breaker_cooldown>,
     .section = Section::kSync,
     .doc = "the window those failures are counted in, and how long the breaker stays open"},
    {.name = "SyncLeaseName",
     .type = KeyType::kDnsLabel,
     .field = In<&G::sync, &SyncConf::lease_name>,
     .section = Section::kSync,
     .doc = "the Lease, in `Namespace`",
     .fix = "'{value}' cannot name a Lease: {error}; e.g. k8sbridge-sync-hpc1",
     .default_doc = "`k8sbridge-sync-<ClusterName>`"},
    {.name = "SyncLeaseDuration",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::lease_duration>,
     .section = Section::kSync,
     .doc = "at least 3s; the leader must renew within 2/3 of it, candidates retry every 1/7 (at "
            "least 1 s)",
     .range = Range{3'000, 86'400'000},
     .fix = "{error}: a lease needs at least 3s (renewals every third of it)"},
    {.name = "SyncMetricsListen",
     .type = KeyType::kHostPort,
     .field = In<&G::sync, &SyncConf::metrics_listen>,
     .section = Section::kSync,
     .doc = "`HOST:PORT` of the Prometheus endpoint (`/metrics`); empty = none",
     .fix = "'{value}' is not HOST:PORT: write e.g. 127.0.0.1:9109, or leave it empty for no "
            "metrics endpoint"},
    {.name = "SyncPollInterval",
     .type = KeyType::kDuration,
     .field = In<&G::sync, &SyncConf::poll_interval>,
     .section = Section::kSync,
     .doc = "how often Slurm is asked for changes (`slurm_load_node` with the last update time: "
            "an unchanged cluster costs one tiny RPC)"},
    {.name = "SyncMaxActionsPerPass",
     .type = KeyType::kInt,
     .field = In<&G::sync, &SyncConf::max_actions_per_pass>,
     .section = Section::kSync,
     .doc = "the most destructive actions (pod deletes, fails, drains) one pass may take; more, "
            "and it takes none of them. `auto`: 10% of the Slurm nodes, at least 20; or a number "
            "from 1",
     .range = Range{1, 1'000'000},
     .fix = "'{value}' is not a cap on destructive actions per pass: write a number from 1 (e.g. "
            "50) or auto (10% of the Slurm nodes, at least 20)",
     .zero_word = "auto"},
    {.name = "SyncTopology",
     .type = KeyType::kString,
     .field = In<&G::sync, &SyncConf::topology>,
     .section = Section::kSync,
     .doc = "Slurm 25.05+: the tree topology (`topology.conf`'s is `default`) in which a running "
            "node of a group without `PlacementDomain` is registered under the leaf of the "
            "Kubernetes node its pod landed on (docs/topology.md, \"Resumed nodes\"); never a "
            "block topology; empty = none. Slurm 24.11 has no such update: ignored there"},
};

constexpr Key<NodeGroup> kNodeGroupKeys[] = {
    {.name = "NodeGroup",
     .type = KeyType::kDnsLabel,
     .field = At<&NodeGroup::name>,
     .section = Section::kNodeGroup,
     .doc = "the group's name, a DNS-1123 label; label `k8sbridge.io/node-group`",
     .fix = "'{value}' cannot name a node group ({error}): it becomes the label "
            "k8sbridge.io/node-group; use e.g. NodeGroup=gpu"},
    {.name = "Nodes",
     .type = KeyType::kHostlist,
     .field = At<&NodeGroup::nodes_expression>,
     .section = Section::kNodeGroup,
     .doc = "a Slurm hostlist of DNS-1123 node names; a node belongs to at most one group"},
    {.name = "PodTemplate",
     .type = KeyType::kString,
     .field = At<&NodeGroup::pod_template>,
     .section = Section::kNodeGroup,
     .doc = "the worker pod template; relative paths are read from the conf's directory",
     .fix = "is empty: give the path of the worker pod template",
     .validate = NonEmptyError},
    {.name = "Gpus",
     .type = KeyType::kInt,
     .field = At<&NodeGroup::gpus>,
     .section = Section::kNodeGroup,
     .doc = "GPUs per pod, overriding the count in the node's Gres",
     .range = Range{0, 1024}},
    {.name = "RuntimeClass",
     .type = KeyType::kString,
     .field = At<&NodeGroup::runtime_class>,
     .section = Section::kNodeGroup,
     .doc = "the RuntimeClass of the group's pods (`spec.runtimeClassName`), e.g. `nvidia`: the "
            "container runtime that hands the pod its GPUs and the driver's libraries",
     .fix = "'{value}' cannot name a RuntimeClass ({error}): give the name of one of the "
            "cluster's RuntimeClasses (kubectl get runtimeclass), e.g. RuntimeClass=nvidia",
     .validate = Dns1123SubdomainError,
     .default_doc = "the template's"},
    {.name = "PlacementLabel",
     .type = KeyType::kLabelKey,
     .field = At<&NodeGroup::placement_label>,
     .section = Section::kNodeGroup,
     .doc = "overrides the global PlacementLabel for the group"},
    {.name = "PlacementAffinity",
     .type = KeyType::kAffinity,
     .field = At<&NodeGroup::placement_affinity>,
     .section = Section::kNodeGroup,
     .doc = "overrides the global PlacementAffinity for the group"},
    {.name = "PlacementDomain",
     .type = KeyType::kLabelValue,
     .field = At<&NodeGroup::placement_domain>,
     .section = Section::kNodeGroup,
     .doc = "pins the group to one fabric domain: the value its PlacementLabel has on the "
            "Kubernetes nodes its pods may run on (e.g. a leaf)",
     .fix = "'{value}' cannot be a value of the group's PlacementLabel ({error}): give the "
            "label's value on the domain's Kubernetes nodes, e.g. PlacementDomain=leaf-0",
     .validate = NonEmptyLabelValueError},
};

constexpr Key<FeatureMapping> kFeatureKeys[] = {
    {.name = "Feature",
     .type = KeyType::kFeatureName,
     .field = At<&FeatureMapping::feature>,
     .section = Section::kFeature,
     .doc = "the Slurm feature (case-sensitive, as in Slurm)",
     .fix = "'{value}' is not a Slurm feature name: it must be non-empty and have none of & | , * "
            "[ ] ( ) ! = : or spaces"},
    {.name = "Selector",
     .type = KeyType::kSelector,
     .field = At<&FeatureMapping::selector>,
     .section = Section::kFeature,
     .doc = "the node label requirements that all must hold: `key=value`, `key!=value`, `key`, "
            "`!key`"},
};

}  // namespace

std::span<const Key<BridgeConfig>> GlobalKeyTable() {
  return kGlobalKeys;
}
std::span<const Key<NodeGroup>> NodeGroupKeyTable() {
  return kNodeGroupKeys;
}
std::span<const Key<FeatureMapping>> FeatureKeyTable() {
  return kFeatureKeys;
}

std::string GlobalKeysMarkdown(const std::vector<Section>& sections) {
  std::string out = KeysMarkdownHeader("key");
  for (const Key<BridgeConfig>& key : kGlobalKeys) {
    if (std::find(sections.begin(), sections.end(), key.section) != sections.end())
      out += KeyMarkdownRow(key);
  }
  return out;
}

}  // namespace k8sbridge::conf
