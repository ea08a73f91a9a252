#include "k8sbridge/conf/bridge_conf.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"

namespace k8sbridge::conf {

namespace {

using Setter = std::function<Status(BridgeConfig&, const std::string&)>;

Result<PlacementAffinity> ParseAffinity(const std::string& value) {
  if (KeyEquals(value, "required"))
    return PlacementAffinity::kRequired;
  if (KeyEquals(value, "preferred"))
    return PlacementAffinity::kPreferred;
  if (KeyEquals(value, "none"))
    return PlacementAffinity::kNone;
  return Status::InvalidArgument(
      fmt::format("'{}' is not one of required, preferred or none", value));
}

Status CheckLabelKey(const std::string& value) {
  std::string error = LabelKeyError(value);
  if (!error.empty()) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not a Kubernetes label key: {}", value, error));
  }
  return Status::Ok();
}

// A yes/no key that sets `field`.
Setter BoolSetter(bool BridgeConfig::*field) {
  return [field](BridgeConfig& c, const std::string& v) {
    auto b = ParseBool(v);
    if (!b.ok())
      return b.status();
    c.*field = *b;
    return Status::Ok();
  };
}

// Issue 16: becomes a declarative key table (the conf rewrite); until then exempt.
// NOLINTNEXTLINE(readability-function-size)
const std::map<std::string, Setter, std::less<>>& GlobalSetters() {
  static const auto* setters = new std::map<std::string, Setter, std::less<>>{
      {"ClusterName",
       [](BridgeConfig& c, const std::string& v) {
         std::string error = v.empty() ? "it is empty" : LabelValueError(v);
         if (!error.empty()) {
           return Status::InvalidArgument(fmt::format(
               "'{}' cannot be a Kubernetes label value ({}): use slurm.conf's ClusterName, "
               "which Slurm keeps lower-case",
               v, error));
         }
         c.cluster_name = v;
         return Status::Ok();
       }},
      {"Kubeconfig",
       [](BridgeConfig& c, const std::string& v) {
         c.kubeconfig = v;
         return Status::Ok();
       }},
      // Plain http:// to the API server sends the bearer token in clear: refused
      // unless asked for (a test API server on loopback).
      {"AllowInsecureHttp", BoolSetter(&BridgeConfig::allow_insecure_http)},
      {"KubeContext",
       [](BridgeConfig& c, const std::string& v) {
         c.kube_context = v;
         return Status::Ok();
       }},
      {"InCluster",
       [](BridgeConfig& c, const std::string& v) {
         auto b = ParseBool(v);
         if (!b.ok())
           return b.status();
         c.in_cluster = *b;
         return Status::Ok();
       }},
      {"Namespace",
       [](BridgeConfig& c, const std::string& v) {
         std::string error = Dns1123LabelError(v);
         if (!error.empty()) {
           return Status::InvalidArgument(
               fmt::format("'{}' is not a Kubernetes namespace name: {}", v, error));
         }
         c.namespace_ = v;
         return Status::Ok();
       }},
      {"QPS",
       [](BridgeConfig& c, const std::string& v) {
         double d = 0;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
         if (ec != std::errc() || end != v.data() + v.size() || !(d > 0) || d > 100'000) {
           return Status::InvalidArgument(
               fmt::format("'{}' is not a request rate: use a number above 0, e.g. 50", v));
         }
         c.qps = d;
         return Status::Ok();
       }},
      {"Burst",
       [](BridgeConfig& c, const std::string& v) {
         auto n = ParseInt(v, 1, 100'000);
         if (!n.ok())
           return n.status();
         c.burst = static_cast<int>(*n);
         return Status::Ok();
       }},
      {"Concurrency",
       [](BridgeConfig& c, const std::string& v) {
         auto n = ParseInt(v, 1, 4096);
         if (!n.ok())
           return n.status();
         c.concurrency = static_cast<int>(*n);
         return Status::Ok();
       }},
      {"ConnectTimeout",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.connect_timeout = *d;
         return Status::Ok();
       }},
      {"RequestTimeout",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.request_timeout = *d;
         return Status::Ok();
       }},
      {"RetryDeadline",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.retry_deadline = *d;
         return Status::Ok();
       }},
      {"WorkerCommand",
       [](BridgeConfig& c, const std::string& v) {
         if (v.empty() || v.front() != '/') {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not an absolute path: give the path of k8sbridge-worker inside the "
               "worker image, e.g. /usr/sbin/k8sbridge-worker",
               v));
         }
         c.worker_command = v;
         return Status::Ok();
       }},
      {"ConfServer",
       [](BridgeConfig& c, const std::string& v) {
         c.conf_server = v;
         return Status::Ok();
       }},
      {"MungeCheck",
       [](BridgeConfig& c, const std::string& v) {
         auto b = ParseBool(v);
         if (!b.ok())
           return b.status();
         c.munge_check = *b;
         return Status::Ok();
       }},
      {"MungeSocket",
       [](BridgeConfig& c, const std::string& v) {
         if (v.empty() || v.front() != '/') {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not an absolute path: give the socket of the munged that slurmctld "
               "uses (slurm.conf AuthInfo=socket=...), e.g. /run/munge/munge.socket.2",
               v));
         }
         c.munge_socket = v;
         return Status::Ok();
       }},
      {"LogFile",
       [](BridgeConfig& c, const std::string& v) {
         if (v.empty() || v.front() != '/') {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not an absolute path: give a file SlurmUser may append to, e.g. "
               "/var/log/slurm/k8sbridge-power.log",
               v));
         }
         c.log_file = v;
         return Status::Ok();
       }},
      // --- k8sbridge-sync (docs/sync.md) ---
      {"SyncHardwareReason",
       [](BridgeConfig& c, const std::string& v) {
         try {
           std::regex re(v, std::regex::ECMAScript | std::regex::icase);
         } catch (const std::regex_error& e) {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not a regular expression ({}): write an ECMAScript pattern, e.g. "
               "'^(\\[hardware\\]|xid|ecc|nvlink)'",
               v, e.what()));
         }
         c.sync.hardware_reason = v;
         return Status::Ok();
       }},
      {"SyncUnschedulableGrace",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.sync.unschedulable_grace = *d;
         return Status::Ok();
       }},
      {"SyncOrphanGrace",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.sync.orphan_grace = *d;
         return Status::Ok();
       }},
      {"SyncCircuitBreakerThreshold",
       [](BridgeConfig& c, const std::string& v) {
         auto n = ParseInt(v, 0, 10'000);
         if (!n.ok())
           return n.status();
         c.sync.breaker_threshold = static_cast<int>(*n);
         return Status::Ok();
       }},
      {"SyncCircuitBreakerCooldown",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.sync.breaker_cooldown = *d;
         return Status::Ok();
       }},
      {"SyncLeaseName",
       [](BridgeConfig& c, const std::string& v) {
         std::string error = Dns1123LabelError(v);
         if (!error.empty()) {
           return Status::InvalidArgument(
               fmt::format("'{}' cannot name a Lease: {}; e.g. k8sbridge-sync-hpc1", v, error));
         }
         c.sync.lease_name = v;
         return Status::Ok();
       }},
      {"SyncLeaseDuration",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         if (*d < std::chrono::seconds(3)) {
           return Status::InvalidArgument(fmt::format(
               "'{}' is too short: a lease needs at least 3s (renewals every third of it)", v));
         }
         c.sync.lease_duration = *d;
         return Status::Ok();
       }},
      {"SyncMetricsListen",
       [](BridgeConfig& c, const std::string& v) {
         size_t colon = v.rfind(':');
         if (!v.empty() && (colon == std::string::npos || colon == 0 ||
                            !ParseInt(v.substr(colon + 1), 0, 65535).ok())) {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not HOST:PORT: write e.g. 127.0.0.1:9109, or leave it empty for no "
               "metrics endpoint",
               v));
         }
         c.sync.metrics_listen = v;
         return Status::Ok();
       }},
      {"SyncPollInterval",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         c.sync.poll_interval = *d;
         return Status::Ok();
       }},
      {"SyncMaxActionsPerPass",
       [](BridgeConfig& c, const std::string& v) {
         if (v == "auto") {
           c.sync.max_actions_per_pass = 0;
           return Status::Ok();
         }
         auto n = ParseInt(v, 1, 1'000'000);
         if (!n.ok()) {
           return Status::InvalidArgument(fmt::format(
               "'{}' is not a cap on destructive actions per pass: write a number from 1 "
               "(e.g. 50) or auto (10% of the Slurm nodes, at least 20)",
               v));
         }
         c.sync.max_actions_per_pass = static_cast<int>(*n);
         return Status::Ok();
       }},
      // --- end of k8sbridge-sync keys ---
      {"GpuResource",
       [](BridgeConfig& c, const std::string& v) {
         if (Status s = CheckLabelKey(v); !s.ok())
           return s;
         c.gpu_resource = v;
         return Status::Ok();
       }},
      {"PlacementLabel",
       [](BridgeConfig& c, const std::string& v) {
         if (Status s = CheckLabelKey(v); !s.ok())
           return s;
         c.placement_label = v;
         return Status::Ok();
       }},
      {"PlacementAffinity",
       [](BridgeConfig& c, const std::string& v) {
         auto a = ParseAffinity(v);
         if (!a.ok())
           return a.status();
         c.placement_affinity = *a;
         return Status::Ok();
       }},
      {"FeatureLabelTimeout",
       [](BridgeConfig& c, const std::string& v) {
         auto d = ParseDuration(v);
         if (!d.ok())
           return d.status();
         if (d->count() <= 0 || *d > std::chrono::seconds(30)) {
           return Status::InvalidArgument(fmt::format(
               "'{}' is out of range: slurmd registration waits this long at most for node "
               "labels, so give 1 ms to 30 s, e.g. 2s",
               v));
         }
         c.feature_label_timeout = *d;
         return Status::Ok();
       }},
      {"FeatureCacheFile",
       [](BridgeConfig& c, const std::string& v) {
         if (v.empty() || v.front() != '/') {
           return Status::InvalidArgument(
               fmt::format("'{}' is not an absolute path: give a file slurmd may write, e.g. "
                           "/var/spool/slurmd/%n/k8sbridge-labels.json (%n is the Slurm node name)",
                           v));
         }
         c.feature_cache_file = v;
         return Status::Ok();
       }},
      {"FeatureLabelPrefix",
       [](BridgeConfig& c, const std::string& v) {
         if (Status s = CheckLabelKey(v + "x"); !s.ok()) {
           return Status::InvalidArgument(fmt::format(
               "'{}' cannot start a label key: {}; e.g. feature.k8sbridge.io/", v, s.message()));
         }
         c.feature_label_prefix = v;
         return Status::Ok();
       }},
  };
  return *setters;
}

std::vector<std::string_view> Names(const std::map<std::string, Setter, std::less<>>& m) {
  std::vector<std::string_view> names;
  for (const auto& [name, setter] : m)
    names.push_back(name);
  return names;
}

// Finds the canonical spelling of `key` among `known` (case-insensitive).
std::string_view Canonical(std::string_view key, const std::vector<std::string_view>& known) {
  for (std::string_view k : known) {
    if (KeyEquals(k, key))
      return k;
  }
  return {};
}

std::string Dirname(std::string_view file) {
  size_t slash = file.rfind('/');
  if (slash == std::string_view::npos)
    return ".";
  if (slash == 0)
    return "/";
  return std::string(file.substr(0, slash));
}

bool IsFeatureName(std::string_view f) {
  if (f.empty())
    return false;
  for (char c : f) {
    if (std::string_view("&|,*[]()!=: \t").find(c) != std::string_view::npos)
      return false;
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view file, const Hostlists& hostlists) : file_(file), hostlists_(hostlists) {
    config_.file = file;
  }

  Result<BridgeConfig> Parse(std::string_view text) {
    auto lines = LexConf(text, file_);
    if (!lines.ok())
      return lines.status();
    for (const ConfLine& line : *lines) {
      Status s;
      const std::string& first = line.pairs.front().key;
      if (KeyEquals(first, "NodeGroup")) {
        s = ParseNodeGroup(line);
      } else if (KeyEquals(first, "Feature")) {
        s = ParseFeature(line);
      } else {
        s = ParseGlobals(line);
      }
      if (!s.ok())
        return s;
    }
    if (Status s = Finish(); !s.ok())
      return s;
    return std::move(config_);
  }

 private:
  std::string Where(const ConfLine& line, const ConfPair& pair) const {
    return fmt::format("{}:{}:{}", file_, line.line, pair.column);
  }
  Status Error(const ConfLine& line, const ConfPair& pair, std::string_view message) const {
    return Status::InvalidArgument(fmt::format("{}: {}: {}", Where(line, pair), pair.key, message));
  }
  Status UnknownKey(const ConfLine& line, const ConfPair& pair, std::string_view record,
                    const std::vector<std::string_view>& known) const {
    std::string hint = ClosestMatch(pair.key, known);
    std::string known_list;
    for (std::string_view k : known)
      known_list += (known_list.empty() ? "" : ", ") + std::string(k);
    return Status::InvalidArgument(
        fmt::format("{}: unknown {}key '{}'{}", Where(line, pair), record, pair.key,
                    hint.empty() ? fmt::format(" (known keys: {})", known_list)
                                 : fmt::format(": did you mean '{}'?", hint)));
  }

  Status ParseGlobals(const ConfLine& line) {
    const auto& setters = GlobalSetters();
    for (const ConfPair& pair : line.pairs) {
      std::string_view name = Canonical(pair.key, GlobalKeys());
      if (name.empty()) {
        if (KeyEquals(pair.key, "NodeGroup") || KeyEquals(pair.key, "Feature") ||
            Canonical(pair.key, NodeGroupKeys()) != "" ||
            Canonical(pair.key, FeatureKeys()) != "") {
          return Error(line, pair,
                       "belongs on a NodeGroup= or Feature= line, and such a line starts with "
                       "that key: move it there");
        }
        return UnknownKey(line, pair, "", GlobalKeys());
      }
      auto [it, inserted] = seen_globals_.emplace(std::string(name), line.line);
      if (!inserted) {
        return Error(line, pair,
                     fmt::format("is already set on line {}: keep one of the two", it->second));
      }
      Status s = setters.find(name)->second(config_, pair.value);
      if (!s.ok())
        return Error(line, pair, s.message());
    }
    return Status::Ok();
  }

  // Issue 16: rewritten with the key table (the conf rewrite); until then exempt.
  // NOLINTNEXTLINE(readability-function-size)
  Status ParseNodeGroup(const ConfLine& line) {
    NodeGroup group;
    group.line = line.line;
    std::map<std::string, const ConfPair*, std::less<>> pairs;
    for (const ConfPair& pair : line.pairs) {
      std::string_view name = Canonical(pair.key, NodeGroupKeys());
      if (name.empty())
        return UnknownKey(line, pair, "NodeGroup ", NodeGroupKeys());
      if (!pairs.emplace(std::string(name), &pair).second) {
        return Error(line, pair, "appears twice on this NodeGroup line: keep one");
      }
    }
    const ConfPair& head = line.pairs.front();
    group.name = head.value;
    if (std::string error = Dns1123LabelError(group.name); !error.empty()) {
      return Error(line, head,
                   fmt::format("'{}' cannot name a node group ({}): it becomes the label "
                               "k8sbridge.io/node-group; use e.g. NodeGroup=gpu",
                               group.name, error));
    }
    for (const NodeGroup& other : config_.node_groups) {
      if (other.name == group.name) {
        return Error(line, head,
                     fmt::format("node group '{}' is already defined on line {}: give each "
                                 "NodeGroup a different name",
                                 group.name, other.line));
      }
    }
    for (std::string_view required : {"Nodes", "PodTemplate"}) {
      if (!pairs.count(required)) {
        return Error(line, head,
                     fmt::format("node group '{}' has no {}=: add {}", group.name, required,
                                 required == "Nodes" ? "Nodes=<Slurm hostlist>, e.g. Nodes=w-[0-7]"
                                                     : "PodTemplate=<path of the worker pod "
                                                       "template YAML>"));
      }
    }
    const ConfPair& nodes = *pairs["Nodes"];
    group.nodes_expression = nodes.value;
    auto expanded = hostlists_.Expand(nodes.value);
    if (!expanded.ok())
      return Error(line, nodes, expanded.status().message());
    if (expanded->empty())
      return Error(line, nodes, "lists no nodes: give a Slurm hostlist");
    for (const std::string& node : *expanded) {
      if (std::string error = Dns1123LabelError(node); !error.empty()) {
        return Error(line, nodes,
                     fmt::format("Slurm node name '{}' cannot be a pod name: {}. A worker pod is "
                                 "named after its Slurm node, so rename the node in slurm.conf "
                                 "to a DNS-1123 label (lower-case letters, digits and '-')",
                                 node, error));
      }
      auto [it, inserted] = node_lines_.emplace(node, std::make_pair(group.name, line.line));
      if (!inserted) {
        return Error(line, nodes,
                     fmt::format("node '{}' is already in node group '{}' (line {}): a node "
                                 "belongs to one group only",
                                 node, it->second.first, it->second.second));
      }
    }
    group.nodes = std::move(*expanded);

    const ConfPair& pod_template = *pairs["PodTemplate"];
    if (pod_template.value.empty()) {
      return Error(line, pod_template, "is empty: give the path of the worker pod template");
    }
    group.pod_template = pod_template.value.front() == '/'
                             ? pod_template.value
                             : Dirname(file_) + "/" + pod_template.value;
    if (auto it = pairs.find("Gpus"); it != pairs.end()) {
      auto n = ParseInt(it->second->value, 0, 1024);
      if (!n.ok())
        return Error(line, *it->second, n.status().message());
      group.gpus = static_cast<int>(*n);
    }
    if (auto it = pairs.find("PlacementLabel"); it != pairs.end()) {
      if (Status s = CheckLabelKey(it->second->value); !s.ok()) {
        return Error(line, *it->second, s.message());
      }
      group.placement_label = it->second->value;
      explicit_label_.push_back(group.name);
    }
    if (auto it = pairs.find("PlacementAffinity"); it != pairs.end()) {
      auto a = ParseAffinity(it->second->value);
      if (!a.ok())
        return Error(line, *it->second, a.status().message());
      group.placement_affinity = *a;
      explicit_affinity_.push_back(group.name);
    }
    config_.node_groups.push_back(std::move(group));
    return Status::Ok();
  }

  Status ParseFeature(const ConfLine& line) {
    FeatureMapping mapping;
    mapping.line = line.line;
    const ConfPair& head = line.pairs.front();
    const ConfPair* selector = nullptr;
    for (const ConfPair& pair : line.pairs) {
      std::string_view name = Canonical(pair.key, FeatureKeys());
      if (name.empty())
        return UnknownKey(line, pair, "Feature ", FeatureKeys());
      if (name == "Selector") {
        if (selector)
          return Error(line, pair, "appears twice on this Feature line: keep one");
        selector = &pair;
      } else if (&pair != &head) {
        return Error(line, pair, "appears twice on this line: write one Feature= per line");
      }
    }
    mapping.feature = head.value;
    if (!IsFeatureName(mapping.feature)) {
      return Error(line, head,
                   fmt::format("'{}' is not a Slurm feature name: it must be non-empty and "
                               "have none of & | , * [ ] ( ) ! = : or spaces",
                               mapping.feature));
    }
    for (const FeatureMapping& other : config_.features) {
      if (other.feature == mapping.feature) {
        return Error(line, head,
                     fmt::format("feature '{}' is already mapped on line {}: keep one mapping "
                                 "(one Selector may hold several requirements, comma-separated)",
                                 mapping.feature, other.line));
      }
    }
    if (!selector) {
      return Error(line, head,
                   fmt::format("feature '{}' has no Selector=: add Selector=<label>=<value>, "
                               "e.g. Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                               mapping.feature));
    }
    auto requirements = ParseLabelSelector(selector->value);
    if (!requirements.ok())
      return Error(line, *selector, requirements.status().message());
    mapping.selector = std::move(*requirements);
    config_.features.push_back(std::move(mapping));
    return Status::Ok();
  }

  Status Finish() {
    auto at = [&](std::string_view key) {
      auto it = seen_globals_.find(std::string(key));
      return it == seen_globals_.end() ? 0 : it->second;
    };
    if (config_.cluster_name.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: ClusterName is not set: add ClusterName=<slurm.conf's ClusterName>; it marks "
          "the pods this cluster owns",
          file_));
    }
    if (config_.in_cluster && !config_.kubeconfig.empty()) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: both Kubeconfig= and InCluster=yes (line {}) are set: keep one",
                      file_, at("Kubeconfig"), at("InCluster")));
    }
    // Relative to the configuration's directory, as PodTemplate= is: the programs
    // run in whatever directory slurmctld or slurmd gives them.
    if (!config_.kubeconfig.empty() && config_.kubeconfig.front() != '/')
      config_.kubeconfig = Dirname(file_) + "/" + config_.kubeconfig;
    if (config_.in_cluster && !config_.kube_context.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: KubeContext= selects a kubeconfig context, but InCluster=yes: remove one", file_,
          at("KubeContext")));
    }
    if (config_.burst < static_cast<int>(config_.qps) && at("Burst") != 0) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: Burst={} is below QPS={}: set Burst at least to QPS", file_,
                      at("Burst"), config_.burst, config_.qps));
    }
    // Without an explicit Burst, a high QPS raises the default burst with it.
    if (at("Burst") == 0)
      config_.burst = std::max(config_.burst, static_cast<int>(config_.qps));
    // Group settings fall back to the global ones.
    auto listed = [](const std::vector<std::string>& v, const std::string& name) {
      return std::find(v.begin(), v.end(), name) != v.end();
    };
    for (NodeGroup& group : config_.node_groups) {
      if (!listed(explicit_label_, group.name))
        group.placement_label = config_.placement_label;
      if (!listed(explicit_affinity_, group.name)) {
        group.placement_affinity = config_.placement_affinity;
      }
    }
    config_.IndexNodeGroups();
    return Status::Ok();
  }

  std::string file_;
  const Hostlists& hostlists_;
  BridgeConfig config_;
  std::map<std::string, int> seen_globals_;
  std::map<std::string, std::pair<std::string, int>> node_lines_;  // node -> group, line
  std::vector<std::string> explicit_label_, explicit_affinity_;
};

}  // namespace

std::string_view PlacementAffinityName(PlacementAffinity a) {
  switch (a) {
    case PlacementAffinity::kNone:
      return "none";
    case PlacementAffinity::kPreferred:
      return "preferred";
    case PlacementAffinity::kRequired:
      return "required";
  }
  return "?";
}

std::string_view OperatorName(LabelRequirement::Op op) {
  switch (op) {
    case LabelRequirement::Op::kIn:
      return "In";
    case LabelRequirement::Op::kNotIn:
      return "NotIn";
    case LabelRequirement::Op::kExists:
      return "Exists";
    case LabelRequirement::Op::kDoesNotExist:
      return "DoesNotExist";
  }
  return "?";
}

Result<std::vector<LabelRequirement>> ParseLabelSelector(std::string_view text) {
  std::vector<LabelRequirement> out;
  if (text.empty()) {
    return Status::InvalidArgument(
        "is empty: give one or more comma-separated requirements such as key=value, key, "
        "!key or key!=value");
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    LabelRequirement r;
    std::string_view key = part;
    if (size_t ne = part.find("!="); ne != std::string_view::npos) {
      r.op = LabelRequirement::Op::kNotIn;
      key = part.substr(0, ne);
      r.value = part.substr(ne + 2);
    } else if (size_t eq = part.find('='); eq != std::string_view::npos) {
      r.op = LabelRequirement::Op::kIn;
      key = part.substr(0, eq);
      r.value = part.substr(eq + 1);
      if (!r.value.empty() && r.value.front() == '=')
        r.value.erase(0, 1);  // "=="
    } else if (!part.empty() && part.front() == '!') {
      r.op = LabelRequirement::Op::kDoesNotExist;
      key = part.substr(1);
    }
    r.key = key;
    if (std::string error = LabelKeyError(r.key); !error.empty()) {
      return Status::InvalidArgument(fmt::format(
          "requirement '{}': '{}' is not a Kubernetes label key ({})", part, r.key, error));
    }
    if (r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn) {
      if (std::string error = LabelValueError(r.value); !error.empty()) {
        return Status::InvalidArgument(fmt::format(
            "requirement '{}': '{}' is not a Kubernetes label value ({})", part, r.value, error));
      }
    }
    out.push_back(std::move(r));
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return out;
}

const NodeGroup* BridgeConfig::GroupOf(std::string_view node) const {
  auto it = group_index_.find(node);
  if (it == group_index_.end() || it->second >= node_groups.size())
    return nullptr;
  return &node_groups[it->second];
}

void BridgeConfig::IndexNodeGroups() {
  group_index_.clear();
  size_t total = 0;
  for (const NodeGroup& group : node_groups)
    total += group.nodes.size();
  group_index_.reserve(total);
  // A node in two groups is refused at parse time; first one wins otherwise, as
  // the linear scan this replaces did.
  for (size_t i = 0; i < node_groups.size(); ++i) {
    for (const std::string& n : node_groups[i].nodes)
      group_index_.emplace(n, i);
  }
}

const FeatureMapping* BridgeConfig::MappingOf(std::string_view feature) const {
  for (const FeatureMapping& mapping : features) {
    if (mapping.feature == feature)
      return &mapping;
  }
  return nullptr;
}

const std::vector<std::string_view>& GlobalKeys() {
  static const auto* keys = new std::vector<std::string_view>(Names(GlobalSetters()));
  return *keys;
}

const std::vector<std::string_view>& NodeGroupKeys() {
  static const std::vector<std::string_view> keys = {
      "NodeGroup", "Nodes", "PodTemplate", "Gpus", "PlacementLabel", "PlacementAffinity"};
  return keys;
}

const std::vector<std::string_view>& FeatureKeys() {
  static const std::vector<std::string_view> keys = {"Feature", "Selector"};
  return keys;
}

Result<BridgeConfig> ParseBridgeConfig(std::string_view text, std::string_view file,
                                       const Hostlists& hostlists) {
  return Parser(file, hostlists).Parse(text);
}

Result<BridgeConfig> LoadBridgeConfig(const std::string& path, const Hostlists& hostlists) {
  std::ifstream in(path);
  if (!in) {
    return Status::IoError(fmt::format(
        "cannot read {}: {}; create it (see conf-templates/k8sbridge.conf) or set K8SBRIDGE_CONF",
        path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseBridgeConfig(text.str(), path, hostlists);
}

std::string DefaultConfigPath() {
  const char* env = std::getenv("K8SBRIDGE_CONF");
  return env && *env ? env : "/etc/slurm/k8sbridge.conf";
}

}  // namespace k8sbridge::conf
