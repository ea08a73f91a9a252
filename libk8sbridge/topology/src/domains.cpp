// Node groups pinned to a fabric domain (PlacementDomain=): their Slurm nodes are
// placed by the domain, so the rendered topology holds for powered-down nodes too.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "k8sbridge/text.h"
#include "k8sbridge/topology/model.h"

namespace k8sbridge::topology {

namespace {

// The node's labels of the tiers above the leaf, up to the first one it lacks.
std::vector<std::string> UpperTiers(const LabeledNode& node, const LabelOptions& options) {
  std::vector<std::string> values;
  for (size_t t = 1; t < options.tiers.size(); ++t) {
    auto it = node.labels.find(options.prefix + options.tiers[t]);
    if (it == node.labels.end())
      break;
    values.push_back(it->second);
  }
  return values;
}

struct Above {
  std::vector<std::string> tiers;  // from the second tier up
  std::string from;                // the Kubernetes node that said so
};

// For each of `leaves`, what its Kubernetes nodes say is above it; they must agree.
Result<std::map<std::string, Above>> AboveLeaves(const std::vector<LabeledNode>& nodes,
                                                 const std::set<std::string>& leaves,
                                                 const LabelOptions& options) {
  const std::string leaf_key = options.prefix + options.tiers.front();
  std::map<std::string, Above> out;
  for (const LabeledNode& node : nodes) {
    auto leaf = node.labels.find(leaf_key);
    if (leaf == node.labels.end() || !leaves.contains(leaf->second))
      continue;
    Above above{UpperTiers(node, options), node.name};
    auto [it, inserted] = out.emplace(leaf->second, above);
    if (!inserted && it->second.tiers != above.tiers) {
      return Status::InvalidArgument(fmt::format(
          "Kubernetes nodes {} and {} are on leaf {}={} but disagree about the switches above "
          "it: \"{}\" vs \"{}\"; fix their {}* labels so that each switch has one parent",
          it->second.from, node.name, leaf_key, leaf->second, text::Join(it->second.tiers, ","),
          text::Join(above.tiers, ","), options.prefix));
    }
  }
  return out;
}

// The pinned groups' Slurm nodes (those in `slurm_nodes`, when it is not empty),
// labelled as the Kubernetes nodes of their leaf are.
Result<std::vector<LabeledNode>> LabelPinnedNodes(const std::vector<LabeledNode>& nodes,
                                                  const std::vector<std::string>& slurm_nodes,
                                                  const std::vector<DomainGroup>& pinned,
                                                  const LabelOptions& options) {
  const std::string leaf_key = options.prefix + options.tiers.front();
  std::set<std::string> leaves;
  for (const DomainGroup& group : pinned) {
    if (group.label != leaf_key) {
      return Status::InvalidArgument(fmt::format(
          "node group {} is pinned to {}={}, but the topology's leaves are the values of {}: "
          "pin the group to its leaf (PlacementLabel={} PlacementDomain=<leaf>), or give "
          "k8sbridge-topology --label-prefix and --label-tiers whose first tier is {}",
          group.name, group.label, group.value, leaf_key, leaf_key, group.label));
    }
    leaves.insert(group.value);
  }
  auto above = AboveLeaves(nodes, leaves, options);
  if (!above.ok())
    return above.status();
  const std::set<std::string> wanted(slurm_nodes.begin(), slurm_nodes.end());
  std::vector<LabeledNode> placed;
  for (const DomainGroup& group : pinned) {
    auto known = above->find(group.value);
    for (const std::string& name : group.nodes) {
      if (!wanted.empty() && !wanted.contains(name))
        continue;
      LabeledNode node{name, {{leaf_key, group.value}}};
      for (size_t t = 0; known != above->end() && t < known->second.tiers.size(); ++t)
        node.labels[options.prefix + options.tiers[t + 1]] = known->second.tiers[t];
      placed.push_back(std::move(node));
    }
  }
  return placed;
}

}  // namespace

Result<SlurmNodeMatch> MatchSlurmNodes(std::vector<LabeledNode> nodes,
                                       const std::vector<std::string>& slurm_nodes,
                                       const std::vector<DomainGroup>& pinned,
                                       const LabelOptions& options) {
  if (pinned.empty())
    return MatchSlurmNodes(std::move(nodes), slurm_nodes);
  if (options.tiers.empty()) {
    return Status::InvalidArgument(
        "label tiers are empty; list the tier label names from the leaf up, e.g. leaf,spine,core");
  }
  auto placed = LabelPinnedNodes(nodes, slurm_nodes, pinned, options);
  if (!placed.ok())
    return placed.status();
  std::set<std::string> pinned_names;
  for (const LabeledNode& node : *placed)
    pinned_names.insert(node.name);
  std::vector<std::string> by_name;
  for (const std::string& name : slurm_nodes) {
    if (!pinned_names.contains(name))
      by_name.push_back(name);
  }
  SlurmNodeMatch match;
  if (!slurm_nodes.empty() && by_name.empty()) {
    // Every Slurm node is pinned: no Kubernetes node stands for one by its name.
    for (const LabeledNode& node : nodes)
      match.left_out.push_back(node.name);
    std::sort(match.left_out.begin(), match.left_out.end());
  } else {
    // A Kubernetes node named after a pinned Slurm node is not where that node runs.
    std::erase_if(nodes, [&](const LabeledNode& node) { return pinned_names.contains(node.name); });
    match = MatchSlurmNodes(std::move(nodes), by_name);
  }
  match.nodes.insert(match.nodes.end(), placed->begin(), placed->end());
  std::sort(match.nodes.begin(), match.nodes.end(),
            [](const LabeledNode& a, const LabeledNode& b) { return a.name < b.name; });
  return match;
}

}  // namespace k8sbridge::topology
