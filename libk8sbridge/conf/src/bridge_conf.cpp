#include "k8sbridge/conf/bridge_conf.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/conf/conf_keys.h"
#include "k8sbridge/contract.h"

namespace k8sbridge::conf {

namespace {

std::string Dirname(std::string_view file) {
  size_t slash = file.rfind('/');
  if (slash == std::string_view::npos)
    return ".";
  if (slash == 0)
    return "/";
  return std::string(file.substr(0, slash));
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
    for (const ConfPair& pair : line.pairs) {
      const Key<BridgeConfig>* key = FindKey(GlobalKeyTable(), pair.key);
      if (key == nullptr) {
        if (FindKey(NodeGroupKeyTable(), pair.key) || FindKey(FeatureKeyTable(), pair.key)) {
          return Error(line, pair,
                       "belongs on a NodeGroup= or Feature= line, and such a line starts with "
                       "that key: move it there");
        }
        return UnknownKey(line, pair, "", GlobalKeys());
      }
      auto [it, inserted] = seen_globals_.emplace(std::string(key->name), line.line);
      if (!inserted) {
        return Error(line, pair,
                     fmt::format("is already set on line {}: keep one of the two", it->second));
      }
      if (Status s = ApplyKey(*key, pair.value, config_); !s.ok())
        return Error(line, pair, s.message());
    }
    return Status::Ok();
  }

  // Reads a record line (its first key names the record) into `record`, key by
  // key through the table; returns each key's pair by name for the record's rules.
  template <typename R>
  Result<std::map<std::string_view, const ConfPair*>> ParseRecord(const ConfLine& line,
                                                                  std::span<const Key<R>> table,
                                                                  R& record) {
    const std::string_view head = table.front().name;
    record.line = line.line;
    std::map<std::string_view, const ConfPair*> pairs;
    for (const ConfPair& pair : line.pairs) {
      const Key<R>* key = FindKey(table, pair.key);
      if (key == nullptr)
        return UnknownKey(line, pair, fmt::format("{} ", head), KeyNames(table));
      if (!pairs.emplace(key->name, &pair).second) {
        return Error(line, pair,
                     key->name == head
                         ? fmt::format("appears twice on this line: write one {}= per line", head)
                         : fmt::format("appears twice on this {} line: keep one", head));
      }
      if (Status s = ApplyKey(*key, pair.value, record); !s.ok())
        return Error(line, pair, s.message());
    }
    return pairs;
  }

  Status ParseNodeGroup(const ConfLine& line) {
    NodeGroup group;
    auto pairs = ParseRecord(line, NodeGroupKeyTable(), group);
    if (!pairs.ok())
      return pairs.status();
    const ConfPair& head = line.pairs.front();
    for (const NodeGroup& other : config_.node_groups) {
      if (other.name == group.name) {
        return Error(line, head,
                     fmt::format("node group '{}' is already defined on line {}: give each "
                                 "NodeGroup a different name",
                                 group.name, other.line));
      }
    }
    for (std::string_view required : {"Nodes", "PodTemplate"}) {
      if (!pairs->count(required)) {
        return Error(line, head,
                     fmt::format("node group '{}' has no {}=: add {}", group.name, required,
                                 required == "Nodes" ? "Nodes=<Slurm hostlist>, e.g. Nodes=w-[0-7]"
                                                     : "PodTemplate=<path of the worker pod "
                                                       "template YAML>"));
      }
    }
    if (Status s = ExpandNodes(line, *pairs->at("Nodes"), group); !s.ok())
      return s;
    if (group.pod_template.front() != '/')
      group.pod_template = Dirname(file_) + "/" + group.pod_template;
    if (pairs->count("PlacementLabel"))
      explicit_label_.push_back(group.name);
    if (pairs->count("PlacementAffinity"))
      explicit_affinity_.push_back(group.name);
    if (pairs->count("PlacementDomain")) {
      DomainPair domain{ConfLine{line.line, {}}, *pairs->at("PlacementDomain")};
      if (pairs->count("PlacementAffinity") &&
          group.placement_affinity != PlacementAffinity::kRequired) {
        return Error(line, *pairs->at("PlacementAffinity"),
                     fmt::format("is {}, but PlacementDomain={} keeps every pod of node group "
                                 "'{}' in its domain (required): remove PlacementAffinity= from "
                                 "this line, or PlacementDomain= to let the pods go elsewhere",
                                 PlacementAffinityName(group.placement_affinity),
                                 group.placement_domain, group.name));
      }
      domains_.emplace(group.name, domain);
    }
    config_.node_groups.push_back(std::move(group));
    return Status::Ok();
  }

  // Expands the group's Nodes= hostlist; every node must be able to name a pod and
  // belong to this group only.
  Status ExpandNodes(const ConfLine& line, const ConfPair& nodes, NodeGroup& group) {
    auto expanded = hostlists_.Expand(group.nodes_expression);
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
    return Status::Ok();
  }

  Status ParseFeature(const ConfLine& line) {
    FeatureMapping mapping;
    auto pairs = ParseRecord(line, FeatureKeyTable(), mapping);
    if (!pairs.ok())
      return pairs.status();
    const ConfPair& head = line.pairs.front();
    for (const FeatureMapping& other : config_.features) {
      if (other.feature == mapping.feature) {
        return Error(line, head,
                     fmt::format("feature '{}' is already mapped on line {}: keep one mapping "
                                 "(one Selector may hold several requirements, comma-separated)",
                                 mapping.feature, other.line));
      }
    }
    if (!pairs->count("Selector")) {
      return Error(line, head,
                   fmt::format("feature '{}' has no Selector=: add Selector=<label>=<value>, "
                               "e.g. Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                               mapping.feature));
    }
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
    if (config_.kube.in_cluster && !config_.kube.kubeconfig.empty()) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: both Kubeconfig= and InCluster=yes (line {}) are set: keep one",
                      file_, at("Kubeconfig"), at("InCluster")));
    }
    // Relative to the configuration's directory, as PodTemplate= is: the programs
    // run in whatever directory slurmctld or slurmd gives them.
    if (!config_.kube.kubeconfig.empty() && config_.kube.kubeconfig.front() != '/')
      config_.kube.kubeconfig = Dirname(file_) + "/" + config_.kube.kubeconfig;
    if (config_.kube.in_cluster && !config_.kube.context.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: KubeContext= selects a kubeconfig context, but InCluster=yes: remove one", file_,
          at("KubeContext")));
    }
    if (config_.kube.burst < static_cast<int>(config_.kube.qps) && at("Burst") != 0) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: Burst={} is below QPS={}: set Burst at least to QPS", file_,
                      at("Burst"), config_.kube.burst, config_.kube.qps));
    }
    // Without an explicit Burst, a high QPS raises the default burst with it.
    if (at("Burst") == 0)
      config_.kube.burst = std::max(config_.kube.burst, static_cast<int>(config_.kube.qps));
    // Group settings fall back to the global ones.
    auto listed = [](const std::vector<std::string>& v, const std::string& name) {
      return std::find(v.begin(), v.end(), name) != v.end();
    };
    for (NodeGroup& group : config_.node_groups) {
      if (!listed(explicit_label_, group.name))
        group.placement_label = config_.power.placement_label;
      if (!listed(explicit_affinity_, group.name)) {
        group.placement_affinity = config_.power.placement_affinity;
      }
      if (Status s = CheckDomain(group); !s.ok())
        return s;
    }
    config_.IndexNodeGroups();
    return Status::Ok();
  }

  // A pinned group's domain is a value of its effective PlacementLabel, which may
  // come from a global line below the group's: checked once all lines are read.
  Status CheckDomain(NodeGroup& group) const {
    auto it = domains_.find(group.name);
    if (it == domains_.end())
      return Status::Ok();
    if (group.placement_label.empty()) {
      return Error(it->second.line, it->second.pair,
                   fmt::format("node group '{}' has no PlacementLabel, and its domain '{}' is a "
                               "value of that label: add PlacementLabel=<the domain's node "
                               "label>, e.g. PlacementLabel=network.topology.nvidia.com/leaf, to "
                               "this line or as a global line",
                               group.name, group.placement_domain));
    }
    // Pinned pods run in their domain, whatever the global affinity says.
    group.placement_affinity = PlacementAffinity::kRequired;
    return Status::Ok();
  }

  std::string file_;
  const Hostlists& hostlists_;
  BridgeConfig config_;
  std::map<std::string, int> seen_globals_;
  std::map<std::string, std::pair<std::string, int>> node_lines_;  // node -> group, line
  std::vector<std::string> explicit_label_, explicit_affinity_;
  struct DomainPair {
    ConfLine line;  // its number only
    ConfPair pair;
  };
  std::map<std::string, DomainPair> domains_;  // group -> its PlacementDomain= pair
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

// Sorted, as "known keys" lists them.
const std::vector<std::string_view>& GlobalKeys() {
  static const auto* keys = [] {
    auto* names = new std::vector<std::string_view>(KeyNames(GlobalKeyTable()));
    std::sort(names->begin(), names->end());
    return names;
  }();
  return *keys;
}

const std::vector<std::string_view>& NodeGroupKeys() {
  static const auto* keys = new std::vector<std::string_view>(KeyNames(NodeGroupKeyTable()));
  return *keys;
}

const std::vector<std::string_view>& FeatureKeys() {
  static const auto* keys = new std::vector<std::string_view>(KeyNames(FeatureKeyTable()));
  return *keys;
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
  const char* env = std::getenv(contract::kEnvConf.data());
  return env && *env ? env : "/etc/slurm/k8sbridge.conf";
}

}  // namespace k8sbridge::conf
