// Kubernetes tiered topology labels -> switch hierarchy. A pure function over
// (node name, labels), so it needs no API client and is tested with plain data.
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "k8sbridge/topology/model.h"

namespace k8sbridge::topology {

namespace {

bool IsLabelValue(std::string_view v) {
  return !v.empty() && v.size() <= 63 && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

std::string LabelSwitchName(const LabelOptions& options, size_t tier, std::string_view value) {
  return fmt::format("{}{}-{}", options.switch_prefix, tier, value);
}

Result<Topology> TopologyFromLabels(const std::vector<LabeledNode>& nodes,
                                    const LabelOptions& options) {
  if (options.tiers.empty()) {
    return Status::InvalidArgument(
        "label tiers are empty; list the tier label names from the leaf up, e.g. leaf,spine,core");
  }
  // switch name -> (tier, parent name, children, nodes)
  struct Entry {
    int tier;
    std::string parent;
    std::string parent_from;  // the node that set the parent, for error messages
    std::set<std::string> children;
    std::vector<std::string> nodes;
  };
  std::map<std::string, Entry> switches;
  std::vector<std::string> cpu_only;
  for (const LabeledNode& node : nodes) {
    std::vector<std::string> chain;  // switch names from the leaf up
    for (size_t t = 0; t < options.tiers.size(); ++t) {
      std::string key = options.prefix + options.tiers[t];
      auto it = node.labels.find(key);
      if (it == node.labels.end()) {
        break;
      }
      if (!IsLabelValue(it->second)) {
        return Status::InvalidArgument(
            fmt::format("node {}: label {}=\"{}\" is not a usable switch name; expected 1-63 "
                        "letters, digits, '-', '_' or '.'",
                        node.name, key, it->second));
      }
      chain.push_back(LabelSwitchName(options, t + 1, it->second));
    }
    if (chain.empty()) {
      cpu_only.push_back(node.name);
      continue;
    }
    for (size_t t = 0; t < chain.size(); ++t) {
      Entry& e = switches[chain[t]];
      e.tier = static_cast<int>(t) + 1;
      std::string parent = t + 1 < chain.size() ? chain[t + 1] : "";
      if (e.parent_from.empty()) {
        e.parent = parent;
        e.parent_from = node.name;
      } else if (e.parent != parent) {
        return Status::InvalidArgument(fmt::format(
            "nodes {} and {} disagree about what is above {}: \"{}\" vs \"{}\"; fix the {}* "
            "labels so that each switch has one parent",
            e.parent_from, node.name, chain[t], e.parent, parent, options.prefix));
      }
      if (t > 0) {
        e.children.insert(chain[t - 1]);
      }
    }
    switches[chain[0]].nodes.push_back(node.name);
  }
  Topology topo;
  for (auto& [name, e] : switches) {
    std::sort(e.nodes.begin(), e.nodes.end());
    topo.switches.push_back(
        TopoSwitch{name, e.tier, {e.children.begin(), e.children.end()}, e.nodes, {}});
    if (e.parent.empty()) {
      topo.roots.push_back(name);
    }
  }
  if (!cpu_only.empty() && options.cpu_only == CpuOnlyPolicy::kOwnRoot) {
    if (switches.contains(options.cpu_only_switch)) {
      return Status::InvalidArgument(fmt::format(
          "cpu_only_switch \"{}\" clashes with a switch from the labels; pick another name",
          options.cpu_only_switch));
    }
    std::sort(cpu_only.begin(), cpu_only.end());
    topo.switches.push_back(TopoSwitch{options.cpu_only_switch, 1, {}, cpu_only, {}});
    topo.roots.push_back(options.cpu_only_switch);
  }
  std::sort(topo.roots.begin(), topo.roots.end());
  std::sort(topo.switches.begin(), topo.switches.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tier, a.name) < std::tie(b.tier, b.name);
  });
  return topo;
}

SlurmNodeMatch MatchSlurmNodes(std::vector<LabeledNode> nodes,
                               const std::vector<std::string>& slurm_nodes) {
  SlurmNodeMatch match;
  std::sort(nodes.begin(), nodes.end(),
            [](const LabeledNode& a, const LabeledNode& b) { return a.name < b.name; });
  if (slurm_nodes.empty()) {
    match.nodes = std::move(nodes);
    return match;
  }
  std::set<std::string> wanted(slurm_nodes.begin(), slurm_nodes.end());
  for (LabeledNode& node : nodes) {
    if (wanted.erase(node.name) > 0) {
      match.nodes.push_back(std::move(node));
    } else {
      match.left_out.push_back(std::move(node.name));
    }
  }
  for (const std::string& name : wanted) {
    match.unlabeled.push_back(name);
    match.nodes.push_back(LabeledNode{name, {}});
  }
  std::sort(match.nodes.begin(), match.nodes.end(),
            [](const LabeledNode& a, const LabeledNode& b) { return a.name < b.name; });
  std::sort(match.left_out.begin(), match.left_out.end());
  return match;
}

Result<std::vector<LabeledNode>> ParseNodeListJson(std::string_view json, std::string_view source) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return Status::InvalidArgument(fmt::format("{}: not JSON at byte {}: {}", source,
                                               doc.GetErrorOffset(),
                                               rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject() || !doc.HasMember("items") || !doc["items"].IsArray()) {
    return Status::InvalidArgument(fmt::format(
        "{}: expected a Kubernetes NodeList with an \"items\" array (kubectl get nodes -o json)",
        source));
  }
  std::vector<LabeledNode> out;
  const auto& items = doc["items"];
  for (rapidjson::SizeType i = 0; i < items.Size(); ++i) {
    const auto& item = items[i];
    if (!item.IsObject() || !item.HasMember("metadata") || !item["metadata"].IsObject() ||
        !item["metadata"].HasMember("name") || !item["metadata"]["name"].IsString()) {
      return Status::InvalidArgument(
          fmt::format("{}: items[{}] has no metadata.name string", source, i));
    }
    const auto& meta = item["metadata"];
    LabeledNode node;
    node.name = meta["name"].GetString();
    if (meta.HasMember("labels")) {
      if (!meta["labels"].IsObject()) {
        return Status::InvalidArgument(fmt::format(
            "{}: items[{}] ({}): metadata.labels is not an object", source, i, node.name));
      }
      for (const auto& label : meta["labels"].GetObject()) {
        if (!label.value.IsString()) {
          return Status::InvalidArgument(fmt::format("{}: items[{}] ({}): label {} is not a string",
                                                     source, i, node.name, label.name.GetString()));
        }
        node.labels.emplace(label.name.GetString(), label.value.GetString());
      }
    }
    out.push_back(std::move(node));
  }
  return out;
}

}  // namespace k8sbridge::topology
