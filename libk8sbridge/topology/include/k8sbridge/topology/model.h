// The switch hierarchy that Slurm's topology plugins consume, built from a fabric
// graph (or from Kubernetes labels), and its three renderings: topology.conf tree
// form, topology.conf block form and the 25.05 topology.yaml.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "k8sbridge/topology/fabric.h"

namespace k8sbridge::topology {

struct TopoSwitch {
  std::string name;
  int tier = 1;                        // 1 = leaf (has nodes), higher = above
  std::vector<std::string> children;   // switch names, sorted (tier > 1)
  std::vector<std::string> nodes;      // Slurm node names, sorted (tier 1)
  std::vector<uint64_t> member_guids;  // physical switches folded into this one
  friend bool operator==(const TopoSwitch&, const TopoSwitch&) = default;
};

struct Topology {
  std::vector<TopoSwitch> switches;  // sorted by (tier, name)
  std::vector<std::string> roots;    // one per separate fabric (+ the CPU-only root), sorted
  // Which physical switches each host hangs off; kept between runs so a host that
  // is down for a while keeps its place (see RememberedAttachments).
  std::map<std::string, std::vector<uint64_t>> attachments;

  const TopoSwitch* Find(const std::string& name) const;
  // The leaf switch a node is under, or "" if none.
  std::string LeafOf(const std::string& node) const;
};

enum class CpuOnlyPolicy { kExclude, kOwnRoot };

struct BuildOptions {
  // How an HCA node description maps to a Slurm node name: a regular expression
  // (POSIX extended) with exactly one capture group. Empty: the first word.
  std::string host_regex;
  // Nodes that are CPU-only even if they have an HCA on the fabric (e.g. storage or
  // login hosts); matched against the whole Slurm node name. Empty: none.
  std::string cpu_only_regex;
  // All Slurm nodes, if known. Those without an HCA on any fabric are CPU-only; a
  // remembered host not in this list is forgotten.
  std::vector<std::string> all_nodes;
  CpuOnlyPolicy cpu_only = CpuOnlyPolicy::kOwnRoot;
  std::string cpu_only_switch = "cpu-only";
  std::string switch_prefix = "ib";  // names are <prefix><tier>-<lowest member GUID in hex>
  // Attachments from the previous run, for hosts absent from this discovery.
  std::map<std::string, std::vector<uint64_t>> remembered;
};

// Validates options that come from users (regexes, names); returns the first error.
Status ValidateOptions(const BuildOptions& options);

// Builds the hierarchy. Leaves that share a host (rail-optimised fabrics: one host,
// several HCAs on several leaves) become one Slurm leaf; higher tiers are the
// switches' distance from the hosts; units that share an upper switch merge. Each
// connected fabric gets its own root, never joined with another.
Result<Topology> BuildTopology(const FabricGraph& graph, const BuildOptions& options,
                               Logger& logger);

// A hierarchy from tiered node labels (Kubernetes). `tier_labels` lists the label
// keys from the lowest tier (leaf) up; a node missing the lowest tier is CPU-only
// (handled as in BuildOptions::cpu_only). A node missing a higher tier gets a
// per-branch synthetic parent so that no two unlabeled branches merge.
struct LabelOptions {
  std::string prefix = "network.topology.nvidia.com/";
  std::vector<std::string> tiers = {"leaf", "spine", "core"};
  CpuOnlyPolicy cpu_only = CpuOnlyPolicy::kOwnRoot;
  std::string cpu_only_switch = "cpu-only";
  std::string switch_prefix = "k8s";
};
// The switch that label value `value` of tier `tier` (1: the leaf) stands for:
// "k8s1-leaf-0". k8sbridge-sync registers a resumed node under its leaf by this name.
std::string LabelSwitchName(const LabelOptions& options, size_t tier, std::string_view value);
struct LabeledNode {
  std::string name;
  std::map<std::string, std::string> labels;
};
Result<Topology> TopologyFromLabels(const std::vector<LabeledNode>& nodes,
                                    const LabelOptions& options);
// Keeps a label topology to Slurm's nodes. The Slurm node is the Kubernetes node of
// the same name (slurmd on the Kubernetes node itself); slurmctld refuses a
// topology.conf that names a node slurm.conf lacks ("Invalid node name", fatal),
// so Kubernetes nodes that are not in `slurm_nodes` are left out, and Slurm nodes
// that no Kubernetes node is named after come back without labels (CPU-only).
// Empty `slurm_nodes`: every Kubernetes node is a Slurm node, as before.
struct SlurmNodeMatch {
  std::vector<LabeledNode> nodes;      // the Slurm nodes, sorted by name
  std::vector<std::string> left_out;   // Kubernetes nodes that are no Slurm node, sorted
  std::vector<std::string> unlabeled;  // Slurm nodes with no Kubernetes node, sorted
};
SlurmNodeMatch MatchSlurmNodes(std::vector<LabeledNode> nodes,
                               const std::vector<std::string>& slurm_nodes);
// A node group pinned to one fabric domain (k8sbridge.conf's PlacementDomain=): its
// pods run only on Kubernetes nodes whose label `label` is `value`, so its Slurm
// nodes have a place in the fabric before any pod runs.
struct DomainGroup {
  std::string name;                // the node group, for messages
  std::vector<std::string> nodes;  // its Slurm nodes
  std::string label;               // PlacementLabel
  std::string value;               // PlacementDomain
};
// As MatchSlurmNodes, but the nodes of `pinned` groups are placed by their domain
// instead of by name: each gets the leaf label (options' prefix + first tier) set
// to its domain, and the upper tiers that the Kubernetes nodes of that leaf carry
// (a leaf no Kubernetes node is on yet is a root until one is). Errors name the
// group and the fix: a group pinned by a label that is not the leaf tier's (a
// powered-down node would have no leaf), Kubernetes nodes of one leaf that
// disagree about the switches above it. Pinned nodes outside a non-empty
// `slurm_nodes` are left out.
Result<SlurmNodeMatch> MatchSlurmNodes(std::vector<LabeledNode> nodes,
                                       const std::vector<std::string>& slurm_nodes,
                                       const std::vector<DomainGroup>& pinned,
                                       const LabelOptions& options);
// Reads a Kubernetes NodeList as JSON (`kubectl get nodes -o json`): each item's
// metadata.name and metadata.labels.
Result<std::vector<LabeledNode>> ParseNodeListJson(std::string_view json, std::string_view source);

// ---- renderings ---------------------------------------------------------------

// topology.conf for topology/tree: SwitchName=... Nodes=... / Switches=...
std::string RenderTreeConf(const Topology& topology);
// topology.conf for topology/block: one BlockName per leaf, in tree order, and
// BlockSizes chosen so that no aggregated block spans two fabrics.
std::string RenderBlockConf(const Topology& topology);
// topology.yaml (Slurm 25.05+): a tree topology (cluster default) and a block one.
std::string RenderTopologyYaml(const Topology& topology);

// Host attachments as text ("<node> <guid>,<guid>" lines) and back, for the state
// kept between runs. Parsing is strict and line-numbered, like every input.
std::string RenderAttachments(const std::map<std::string, std::vector<uint64_t>>& attachments);
Result<std::map<std::string, std::vector<uint64_t>>> ParseAttachments(std::string_view text,
                                                                      std::string_view source);

}  // namespace k8sbridge::topology
