#include "k8sbridge/conf/conf_keys.h"

#include <algorithm>
#include <limits>
#include <regex>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/text.h"

namespace k8sbridge::conf {

namespace {

using std::chrono::milliseconds;

// --- Validators: "" when the value is fine, else what is wrong with it. ---

std::string AbsolutePathError(std::string_view value) {
  return !value.empty() && value.front() == '/' ? "" : "it is not an absolute path";
}

std::string NonEmptyError(std::string_view value) {
  return value.empty() ? "it is empty" : "";
}

std::string ClusterNameError(std::string_view value) {
  return value.empty() ? "it is empty" : LabelValueError(value);
}

std::string LabelPrefixError(std::string_view value) {
  // A prefix is good when a feature name after it makes a label key.
  std::string key = std::string(value) + "x";
  std::string error = LabelKeyError(key);
  return error.empty() ? "" : fmt::format("'{}' is not a Kubernetes label key: {}", key, error);
}

// Configuration is read once at start, never on a hot path: std::regex reports
// a bad pattern only by throwing.
std::string RegexError(std::string_view value) {
  try {
    std::regex re(value.begin(), value.end(), std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    return e.what();
  }
  return "";
}

std::string HostPortError(std::string_view value) {
  size_t colon = value.rfind(':');
  if (value.empty())
    return "";
  if (colon == std::string_view::npos || colon == 0 ||
      !text::ParseInt<int>(value.substr(colon + 1), 0, 65535).ok()) {
    return "it is not HOST:PORT";
  }
  return "";
}

std::string FeatureNameError(std::string_view value) {
  if (value.empty())
    return "it is empty";
  for (char c : value) {
    if (std::string_view("&|,*[]()!=: \t").find(c) != std::string_view::npos)
      return fmt::format("it has '{}'", c);
  }
  return "";
}

using Validator = std::string (*)(std::string_view);

// The validator and the message a type has when its row names none.
struct TypeRule {
  Validator validate;
  std::string_view message;
};

TypeRule RuleOf(KeyType type) {
  switch (type) {
    case KeyType::kAbsolutePath:
      return {AbsolutePathError, "'{value}' is not an absolute path"};
    case KeyType::kLabelKey:
      return {LabelKeyError, "'{value}' is not a Kubernetes label key: {error}"};
    case KeyType::kLabelValue:
      return {LabelValueError, "'{value}' is not a Kubernetes label value: {error}"};
    case KeyType::kDnsLabel:
      return {Dns1123LabelError, "'{value}' is not a DNS-1123 label: {error}"};
    case KeyType::kRegex:
      return {RegexError, "'{value}' is not a regular expression ({error})"};
    case KeyType::kHostPort:
      return {HostPortError, "'{value}' is not HOST:PORT"};
    case KeyType::kFeatureName:
      return {FeatureNameError, "'{value}' is not a Slurm feature name: {error}"};
    default:
      return {nullptr, {}};
  }
}

Result<PlacementAffinity> ParseAffinity(std::string_view value) {
  for (PlacementAffinity a :
       {PlacementAffinity::kRequired, PlacementAffinity::kPreferred, PlacementAffinity::kNone}) {
    if (KeyEquals(value, PlacementAffinityName(a)))
      return a;
  }
  return Status::InvalidArgument(
      fmt::format("'{}' is not one of required, preferred or none", value));
}

// A value the type could not read: the key's fix, else the type's `message`.
template <typename R>
Status Refuse(const Key<R>& key, std::string_view value, const std::string& message) {
  if (key.fix.empty())
    return Status::InvalidArgument(message);
  return Status::InvalidArgument(
      fmt::format(fmt::runtime(key.fix), fmt::arg("value", value), fmt::arg("error", message)));
}

// A value its validator refused: the key's fix, else the type's pattern.
template <typename R>
Status RefuseInvalid(const Key<R>& key, std::string_view value, std::string_view error,
                     std::string_view type_pattern) {
  std::string_view pattern = key.fix.empty() ? type_pattern : key.fix;
  return Status::InvalidArgument(
      fmt::format(fmt::runtime(pattern), fmt::arg("value", value), fmt::arg("error", error)));
}

template <typename T, typename R>
Status Store(const Key<R>& key, R& record, T value) {
  if (auto* field = std::get_if<T& (*)(R&)>(&key.field)) {
    (*field)(record) = std::move(value);
    return Status::Ok();
  }
  if constexpr (std::is_same_v<T, int>) {
    if (auto* optional = std::get_if<std::optional<int>& (*)(R&)>(&key.field)) {
      (*optional)(record) = value;
      return Status::Ok();
    }
  }
  return Status::Internal(fmt::format("key table: {}'s field does not hold its type", key.name));
}

// Parses `value` as T and stores it; a parse error is refused with the key's fix.
template <typename T, typename R>
Status StoreParsed(const Key<R>& key, R& record, std::string_view value, Result<T> parsed) {
  if (!parsed.ok())
    return Refuse(key, value, parsed.status().message());
  return Store<T>(key, record, std::move(*parsed));
}

template <typename R>
Status StoreNumber(const Key<R>& key, std::string_view value, R& record) {
  const Range range = key.range.value_or(
      Range{std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max()});
  switch (key.type) {
    case KeyType::kInt: {
      if (!key.zero_word.empty() && value == key.zero_word)
        return Store<int>(key, record, 0);
      const double lo = std::max<double>(range.min, std::numeric_limits<int>::min());
      const double hi = std::min<double>(range.max, std::numeric_limits<int>::max());
      return StoreParsed(key, record, value,
                         text::ParseInt<int>(value, static_cast<int>(lo), static_cast<int>(hi)));
    }
    case KeyType::kDouble:
      return StoreParsed(key, record, value, text::ParseDouble(value, range.min, range.max));
    default: {
      if (!key.range)
        return StoreParsed(key, record, value, text::ParseDuration(value));
      return StoreParsed(key, record, value,
                         text::ParseDuration(value, milliseconds(static_cast<int64_t>(range.min)),
                                             milliseconds(static_cast<int64_t>(range.max))));
    }
  }
}

template <typename R>
Status Apply(const Key<R>& key, std::string_view value, R& record) {
  switch (key.type) {
    case KeyType::kBool:
      return StoreParsed(key, record, value, ParseBool(std::string(value)));
    case KeyType::kInt:
    case KeyType::kDouble:
    case KeyType::kDuration:
      return StoreNumber(key, value, record);
    case KeyType::kAffinity:
      return StoreParsed(key, record, value, ParseAffinity(value));
    case KeyType::kSelector:
      return StoreParsed(key, record, value, ParseLabelSelector(value));
    default:
      break;
  }
  TypeRule rule = RuleOf(key.type);
  if (Validator validate = key.validate ? key.validate : rule.validate) {
    if (std::string error = validate(value); !error.empty())
      return RefuseInvalid(key, value, error,
                           rule.message.empty() ? "'{value}': {error}" : rule.message);
  }
  return Store<std::string>(key, record, std::string(value));
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
     .validate = ClusterNameError,
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
     .doc = "namespace of the worker pods (DNS-1123 label)",
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

Status ApplyKey(const Key<BridgeConfig>& key, std::string_view value, BridgeConfig& record) {
  return Apply(key, value, record);
}
Status ApplyKey(const Key<NodeGroup>& key, std::string_view value, NodeGroup& record) {
  return Apply(key, value, record);
}
Status ApplyKey(const Key<FeatureMapping>& key, std::string_view value, FeatureMapping& record) {
  return Apply(key, value, record);
}

}  // namespace k8sbridge::conf

namespace k8sbridge::conf {

std::span<const Key<BridgeConfig>> GlobalKeyTable() {
  return kGlobalKeys;
}
std::span<const Key<NodeGroup>> NodeGroupKeyTable() {
  return kNodeGroupKeys;
}
std::span<const Key<FeatureMapping>> FeatureKeyTable() {
  return kFeatureKeys;
}

namespace {

// A default as the docs write it: "—" for nothing, code font where markdown
// would read the characters as markup.
std::string DocString(const std::string& value) {
  if (value.empty())
    return "—";
  if (value.find_first_of("\\|*_[") == std::string::npos)
    return value;
  std::string escaped;
  for (char c : value)
    escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return "`" + escaped + "`";
}

// The default of `key` in a default-constructed record: the section structs hold
// the only copy of every default.
template <typename R>
std::string DefaultDoc(const Key<R>& key) {
  if (!key.default_doc.empty())
    return std::string(key.default_doc);
  R defaults;
  return std::visit(
      [&](auto field) -> std::string {
        const auto& value = field(defaults);
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return DocString(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          return value ? "yes" : "no";
        } else if constexpr (std::is_same_v<T, int>) {
          return value == 0 && !key.zero_word.empty() ? std::string(key.zero_word)
                                                      : std::to_string(value);
        } else if constexpr (std::is_same_v<T, double>) {
          return fmt::format("{:g}", value);
        } else if constexpr (std::is_same_v<T, milliseconds>) {
          return text::FormatDuration(value);
        } else if constexpr (std::is_same_v<T, PlacementAffinity>) {
          return std::string(PlacementAffinityName(value));
        } else {
          return "—";
        }
      },
      key.field);
}

}  // namespace

std::string GlobalKeysMarkdown(const std::vector<Section>& sections) {
  std::string out = "| key | default | meaning |\n|---|---|---|\n";
  for (const Key<BridgeConfig>& key : kGlobalKeys) {
    if (std::find(sections.begin(), sections.end(), key.section) == sections.end())
      continue;
    out += fmt::format("| `{}` | {} | {} |\n", key.name, DefaultDoc(key), key.doc);
  }
  return out;
}

}  // namespace k8sbridge::conf
