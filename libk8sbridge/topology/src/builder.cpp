// Fabric graph -> switch hierarchy. See model.h for the rules; the reasons:
//  - Leaves are grouped by shared hosts because Slurm's tree plugin wants every
//    node under exactly one leaf; on a rail-optimised fabric the rail leaves of one
//    host group are one scheduling unit (traffic between those hosts never leaves
//    them), so folding them is exact, not an approximation.
//  - Tiers come from the distance to the hosts, which holds for 2- and 3-tier fat
//    trees and for rail fabrics whose spines are shared or per rail.
//  - Names come from the lowest GUID among the physical switches of a unit: they do
//    not depend on discovery order, and only change when that hardware changes.
#include <algorithm>
#include <numeric>
#include <optional>

#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/topology/model.h"
#include "posix_regex.h"

namespace k8sbridge::topology {

namespace {

bool IsSlurmName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

struct UnionFind {
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t Find(size_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }
  void Join(size_t a, size_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) {
      parent[std::max(a, b)] = std::min(a, b);
    }
  }
  std::vector<size_t> parent;
};

// One Slurm switch being built.
struct Unit {
  std::string name;
  int tier = 1;
  int fabric = 0;             // component index
  std::vector<int> frontier;  // switch indices at the unit's current top
  std::vector<std::string> children;
  std::vector<std::string> nodes;
  std::vector<uint64_t> member_guids;  // physical switches this Slurm switch stands for
};

}  // namespace

const TopoSwitch* Topology::Find(const std::string& name) const {
  for (const TopoSwitch& sw : switches) {
    if (sw.name == name) {
      return &sw;
    }
  }
  return nullptr;
}

std::string Topology::LeafOf(const std::string& node) const {
  for (const TopoSwitch& sw : switches) {
    if (std::binary_search(sw.nodes.begin(), sw.nodes.end(), node)) {
      return sw.name;
    }
  }
  return "";
}

Status ValidateOptions(const BuildOptions& options) {
  if (!options.host_regex.empty()) {
    auto re = PosixRegex::Compile(options.host_regex, "host_regex", false);
    if (!re.ok()) {
      return re.status();
    }
    if ((*re)->groups() != 1) {
      return Status::InvalidArgument(fmt::format(
          "host_regex \"{}\" has {} capture groups; it needs exactly one, around the Slurm node "
          "name, e.g. \"^([^ ]+) mlx5_\"",
          options.host_regex, (*re)->groups()));
    }
  }
  if (!options.cpu_only_regex.empty()) {
    if (auto re = PosixRegex::Compile(options.cpu_only_regex, "cpu_only_regex", true); !re.ok()) {
      return re.status();
    }
  }
  if (!IsSlurmName(options.cpu_only_switch)) {
    return Status::InvalidArgument(
        fmt::format("cpu_only_switch \"{}\" is not a valid Slurm switch name; use letters, digits, "
                    "'-', '_', '.'",
                    options.cpu_only_switch));
  }
  if (!IsSlurmName(options.switch_prefix) ||
      std::isdigit(static_cast<unsigned char>(options.switch_prefix.back()))) {
    return Status::InvalidArgument(
        fmt::format("switch_prefix \"{}\" must be letters, digits, '-', '_', '.' and not end in a "
                    "digit (the tier number follows it)",
                    options.switch_prefix));
  }
  if (options.cpu_only_switch.starts_with(options.switch_prefix)) {
    return Status::InvalidArgument(fmt::format(
        "cpu_only_switch \"{}\" starts with switch_prefix \"{}\" and could clash with a "
        "fabric switch name; pick another name or prefix",
        options.cpu_only_switch, options.switch_prefix));
  }
  return Status::Ok();
}

namespace {

// BuildTopology's steps, in order; each step reads what the ones before it left.
class TopologyBuilder {
 public:
  TopologyBuilder(const FabricGraph& graph, const BuildOptions& options, Logger& logger,
                  std::shared_ptr<PosixRegex> host_re, std::shared_ptr<PosixRegex> cpu_re)
      : graph_(graph),
        options_(options),
        logger_(logger),
        host_re_(std::move(host_re)),
        cpu_re_(std::move(cpu_re)) {}

  Topology Build() {
    IndexSwitches();
    MapHosts();
    SeparateCpuOnly();
    FindFabrics();
    KeepOneFabricPerHost();
    MeasureTiers();
    BuildLeaves();
    MergeUpperTiers();
    return Finish();
  }

 private:
  // ---- switches and their links ------------------------------------------------
  // Indices in GUID order, so that every later step is independent of the order in
  // which the fabric was read.
  void IndexSwitches() {
    for (const auto& [guid, node] : graph_.nodes()) {
      if (node.kind == NodeKind::kSwitch) {
        sw_guid_.push_back(guid);
      } else if (node.kind == NodeKind::kCa) {
        ca_guid_.push_back(guid);
      }
    }
    std::sort(sw_guid_.begin(), sw_guid_.end());
    std::sort(ca_guid_.begin(), ca_guid_.end());
    sw_index_.reserve(sw_guid_.size());
    for (size_t i = 0; i < sw_guid_.size(); ++i) {
      sw_index_.emplace(sw_guid_[i], static_cast<int>(i));
    }
    num_sw_ = static_cast<int>(sw_guid_.size());
    sw_adj_.resize(num_sw_);
    for (int i = 0; i < num_sw_; ++i) {
      sw_adj_[i] = SwitchesOf(graph_.Neighbours(sw_guid_[i]));
    }
  }

  // The switch indices among `guids` (in their order); other GUIDs are skipped.
  template <typename Guids>
  std::vector<int> SwitchesOf(const Guids& guids) const {
    std::vector<int> list;
    for (uint64_t g : guids) {
      if (auto it = sw_index_.find(g); it != sw_index_.end()) {
        list.push_back(it->second);
      }
    }
    return list;
  }

  // ---- hosts: HCA descriptions -> Slurm node names -----------------------------
  void MapHosts() {
    size_t unmapped = 0;
    std::string unmapped_example;
    for (uint64_t guid : ca_guid_) {
      const FabricNode& node = graph_.nodes().at(guid);
      std::string host;
      if (host_re_) {
        host = host_re_->Capture(node.description);
      } else {
        host = node.description.substr(0, node.description.find_first_of(" \t"));
      }
      if (!IsSlurmName(host)) {
        if (unmapped++ == 0) {
          unmapped_example = node.description;
        }
        continue;
      }
      auto& list = host_sw_[host];
      std::vector<int> switches = SwitchesOf(graph_.Neighbours(guid));
      list.insert(list.end(), switches.begin(), switches.end());
    }
    if (unmapped > 0) {
      logger_.Warning(
          "{} HCA(s) have a node description that gives no valid Slurm node name (e.g. \"{}\"); "
          "they are left out. Set host_regex if descriptions are not \"<node> <hca>\"",
          unmapped, unmapped_example);
    }
  }

  bool CpuOnlyByName(const std::string& host) const { return cpu_re_ && cpu_re_->Matches(host); }

  // Hosts that are no Slurm node leave; CPU-only ones (by name, without a switch,
  // or Slurm nodes absent from the fabric) go to cpu_only_; hosts absent now keep
  // the place they had, as long as their switches exist.
  void SeparateCpuOnly() {
    all_nodes_.insert(options_.all_nodes.begin(), options_.all_nodes.end());
    for (auto it = host_sw_.begin(); it != host_sw_.end();) {
      const std::string& host = it->first;
      if (!all_nodes_.empty() && !all_nodes_.contains(host)) {
        logger_.Debug("host {} is on the fabric but not a Slurm node; left out", host);
        it = host_sw_.erase(it);
      } else if (CpuOnlyByName(host) || it->second.empty()) {
        // CPU-only by name, or an HCA with no switch behind it.
        cpu_only_.insert(host);
        it = host_sw_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& [host, guids] : options_.remembered) {
      if (host_sw_.contains(host) || cpu_only_.contains(host)) {
        continue;
      }
      if (!all_nodes_.empty() && !all_nodes_.contains(host)) {
        continue;
      }
      if (CpuOnlyByName(host)) {
        continue;
      }
      std::vector<int> list = SwitchesOf(guids);
      if (!list.empty()) {
        host_sw_.emplace(host, std::move(list));
      }
    }
    for (const std::string& node : all_nodes_) {
      if (!host_sw_.contains(node)) {
        cpu_only_.insert(node);
      }
    }
  }

  // ---- separate fabrics: connected components of switches ------------------------
  void FindFabrics() {
    fabric_of_.assign(num_sw_, -1);
    for (int start = 0; start < num_sw_; ++start) {
      if (fabric_of_[start] >= 0) {
        continue;
      }
      int id = static_cast<int>(fabric_min_guid_.size());
      fabric_min_guid_.push_back(sw_guid_[start]);
      fabric_size_.push_back(0);
      std::vector<int> stack{start};
      fabric_of_[start] = id;
      while (!stack.empty()) {
        int s = stack.back();
        stack.pop_back();
        ++fabric_size_[id];
        fabric_min_guid_[id] = std::min(fabric_min_guid_[id], sw_guid_[s]);
        for (int nb : sw_adj_[s]) {
          if (fabric_of_[nb] < 0) {
            fabric_of_[nb] = id;
            stack.push_back(nb);
          }
        }
      }
    }
  }

  // A host on two fabrics (e.g. compute and storage) belongs to the one holding
  // most of its HCAs; ties go to the larger fabric, then the lower GUID.
  void KeepOneFabricPerHost() {
    for (auto& [host, list] : host_sw_) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
      std::map<int, int> count;
      for (int s : list) {
        ++count[fabric_of_[s]];
      }
      if (count.size() > 1) {
        auto best = std::max_element(count.begin(), count.end(), [&](const auto& a, const auto& b) {
          // Fewer HCAs < more; then smaller fabric < larger; then higher GUID < lower.
          return std::tuple(a.second, fabric_size_[a.first], fabric_min_guid_[b.first]) <
                 std::tuple(b.second, fabric_size_[b.first], fabric_min_guid_[a.first]);
        });
        int keep = best->first;
        std::erase_if(list, [&](int s) { return fabric_of_[s] != keep; });
        logger_.Info("host {} has HCAs on {} separate fabrics; placed on the one with switch {:#x}",
                     host, count.size(), fabric_min_guid_[keep]);
      }
    }
  }

  // ---- tiers: distance from the hosts -------------------------------------------
  // by_distance_ holds the reached switches in breadth-first order.
  void MeasureTiers() {
    dist_.assign(num_sw_, -1);
    for (const auto& [host, list] : host_sw_) {
      for (int s : list) {
        if (dist_[s] < 0) {
          dist_[s] = 0;
          by_distance_.push_back(s);
        }
      }
    }
    for (size_t q = 0; q < by_distance_.size(); ++q) {
      for (int nb : sw_adj_[by_distance_[q]]) {
        if (dist_[nb] < 0) {
          dist_[nb] = dist_[by_distance_[q]] + 1;
          by_distance_.push_back(nb);
        }
      }
    }
  }

  void Emit(Unit& u) {
    std::sort(u.children.begin(), u.children.end());
    std::sort(u.nodes.begin(), u.nodes.end());
    std::sort(u.member_guids.begin(), u.member_guids.end());
    out_switches_.push_back(TopoSwitch{u.name, u.tier, u.children, u.nodes, u.member_guids});
  }

  // "<prefix><tier>-<lowest member GUID>"
  std::string UnitName(std::string_view tier, const std::vector<uint64_t>& member_guids) const {
    return fmt::format("{}{}-{:x}", options_.switch_prefix, tier,
                       *std::min_element(member_guids.begin(), member_guids.end()));
  }

  // ---- leaves: leaf switches joined by shared hosts ------------------------------
  void BuildLeaves() {
    UnionFind leaf_uf(num_sw_);
    for (const auto& [host, list] : host_sw_) {
      for (size_t i = 1; i < list.size(); ++i) {
        leaf_uf.Join(list[0], list[i]);
      }
    }
    std::map<size_t, int> unit_of_root;  // union-find root -> unit index
    for (int s : by_distance_) {
      if (dist_[s] != 0) {
        continue;
      }
      size_t root = leaf_uf.Find(s);
      auto [it, inserted] = unit_of_root.emplace(root, static_cast<int>(units_.size()));
      if (inserted) {
        units_.emplace_back();
        units_.back().fabric = fabric_of_[s];
      }
      units_[it->second].frontier.push_back(s);
    }
    for (const auto& [host, list] : host_sw_) {
      units_[unit_of_root.at(leaf_uf.Find(list[0]))].nodes.push_back(host);
    }
    for (Unit& u : units_) {
      std::sort(u.frontier.begin(), u.frontier.end());
      for (int s : u.frontier) {
        u.member_guids.push_back(sw_guid_[s]);
      }
      u.name = UnitName("1", u.member_guids);
      Emit(u);
    }
  }

  // ---- upper tiers: units sharing a switch one tier up merge ---------------------
  void MergeUpperTiers() {
    for (int tier = 1;; ++tier) {
      std::vector<std::vector<int>> upward = SwitchesAbove(tier);
      if (std::all_of(upward.begin(), upward.end(), [](const auto& u) { return u.empty(); })) {
        break;
      }
      std::vector<Unit> next;
      for (auto& [root, members] : UnitsSharingASwitch(upward)) {
        std::vector<int> frontier;
        for (size_t u : members) {
          frontier.insert(frontier.end(), upward[u].begin(), upward[u].end());
        }
        std::sort(frontier.begin(), frontier.end());
        frontier.erase(std::unique(frontier.begin(), frontier.end()), frontier.end());
        if (members.size() == 1) {
          // Nothing merges here: the unit goes on up through these switches as itself.
          Unit carried = std::move(units_[members[0]]);
          carried.frontier = std::move(frontier);
          next.push_back(std::move(carried));
          continue;
        }
        next.push_back(Merge(tier, members, std::move(frontier)));
        Emit(next.back());
      }
      units_ = std::move(next);
    }
  }

  // For each unit, the switches at distance `tier` linked to its frontier (sorted).
  std::vector<std::vector<int>> SwitchesAbove(int tier) const {
    std::vector<std::vector<int>> upward(units_.size());
    for (size_t u = 0; u < units_.size(); ++u) {
      for (int s : units_[u].frontier) {
        for (int nb : sw_adj_[s]) {
          if (dist_[nb] == tier) {
            upward[u].push_back(nb);
          }
        }
      }
      std::sort(upward[u].begin(), upward[u].end());
      upward[u].erase(std::unique(upward[u].begin(), upward[u].end()), upward[u].end());
    }
    return upward;
  }

  // Units grouped by the upper switches they share (directly or through others).
  std::map<size_t, std::vector<size_t>> UnitsSharingASwitch(
      const std::vector<std::vector<int>>& upward) const {
    UnionFind unit_uf(units_.size());
    std::unordered_map<int, size_t> first_unit_of_switch;
    for (size_t u = 0; u < units_.size(); ++u) {
      for (int s : upward[u]) {
        auto [it, inserted] = first_unit_of_switch.emplace(s, u);
        if (!inserted) {
          unit_uf.Join(it->second, u);
        }
      }
    }
    std::map<size_t, std::vector<size_t>> groups;
    for (size_t u = 0; u < units_.size(); ++u) {
      groups[unit_uf.Find(u)].push_back(u);
    }
    return groups;
  }

  Unit Merge(int tier, const std::vector<size_t>& members, std::vector<int> frontier) const {
    Unit merged;
    merged.tier = tier + 1;
    merged.fabric = units_[members[0]].fabric;
    merged.frontier = std::move(frontier);
    for (int s : merged.frontier) {
      merged.member_guids.push_back(sw_guid_[s]);
    }
    int child_tier = 0;
    for (size_t u : members) {
      merged.children.push_back(units_[u].name);
      child_tier = std::max(child_tier, units_[u].tier);
    }
    merged.tier = std::max(tier + 1, child_tier + 1);
    merged.name = UnitName(std::to_string(tier + 1), merged.member_guids);
    return merged;
  }

  // ---- one root per fabric --------------------------------------------------------
  Topology Finish() {
    Topology topo;
    AddRoots(topo);
    AddCpuOnly(topo);
    std::sort(topo.roots.begin(), topo.roots.end());
    std::sort(out_switches_.begin(), out_switches_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.tier, a.name) < std::tie(b.tier, b.name);
    });
    topo.switches = std::move(out_switches_);
    for (const auto& [host, list] : host_sw_) {
      std::vector<uint64_t>& guids = topo.attachments[host];
      for (int s : list) {
        guids.push_back(sw_guid_[s]);
      }
      std::sort(guids.begin(), guids.end());
    }
    return topo;
  }

  void AddRoots(Topology& topo) {
    std::map<int, std::vector<size_t>> by_fabric;
    for (size_t u = 0; u < units_.size(); ++u) {
      by_fabric[units_[u].fabric].push_back(u);
    }
    for (auto& [fabric, members] : by_fabric) {
      if (members.size() == 1) {
        topo.roots.push_back(units_[members[0]].name);
        continue;
      }
      // Units of one fabric that no upper switch joins (e.g. leaves cabled directly
      // to each other): a synthetic root keeps them in one fabric for Slurm.
      Unit root;
      root.fabric = fabric;
      for (size_t u : members) {
        root.children.push_back(units_[u].name);
        root.tier = std::max(root.tier, units_[u].tier + 1);
      }
      root.name = fmt::format("{}root-{:x}", options_.switch_prefix, fabric_min_guid_[fabric]);
      Emit(root);
      topo.roots.push_back(root.name);
    }
  }

  void AddCpuOnly(Topology& topo) {
    if (cpu_only_.empty()) {
      return;
    }
    if (options_.cpu_only == CpuOnlyPolicy::kOwnRoot) {
      Unit cpu;
      cpu.name = options_.cpu_only_switch;
      cpu.nodes.assign(cpu_only_.begin(), cpu_only_.end());
      Emit(cpu);
      topo.roots.push_back(cpu.name);
    } else {
      logger_.Info("{} CPU-only node(s) left out of the topology: {}", cpu_only_.size(),
                   CompressHostlist({cpu_only_.begin(), cpu_only_.end()}));
    }
  }

  const FabricGraph& graph_;
  const BuildOptions& options_;
  Logger& logger_;
  std::shared_ptr<PosixRegex> host_re_, cpu_re_;
  std::vector<uint64_t> sw_guid_, ca_guid_;
  std::unordered_map<uint64_t, int> sw_index_;
  int num_sw_ = 0;
  std::vector<std::vector<int>> sw_adj_;
  std::map<std::string, std::vector<int>> host_sw_;  // host -> its switches
  std::set<std::string> all_nodes_, cpu_only_;
  std::vector<int> fabric_of_;  // switch -> fabric
  std::vector<uint64_t> fabric_min_guid_;
  std::vector<int> fabric_size_;
  std::vector<int> dist_;         // switch -> hops from the hosts; -1: unreached
  std::vector<int> by_distance_;  // reached switches, breadth-first
  std::vector<Unit> units_;       // the current top of each Slurm switch tree
  std::vector<TopoSwitch> out_switches_;
};

}  // namespace

Result<Topology> BuildTopology(const FabricGraph& graph, const BuildOptions& options,
                               Logger& logger) {
  if (Status s = ValidateOptions(options); !s.ok()) {
    return s;
  }
  std::shared_ptr<PosixRegex> host_re;
  std::shared_ptr<PosixRegex> cpu_re;
  if (!options.host_regex.empty()) {
    host_re = *PosixRegex::Compile(options.host_regex, "host_regex", false);
  }
  if (!options.cpu_only_regex.empty()) {
    cpu_re = *PosixRegex::Compile(options.cpu_only_regex, "cpu_only_regex", true);
  }
  return TopologyBuilder(graph, options, logger, std::move(host_re), std::move(cpu_re)).Build();
}

}  // namespace k8sbridge::topology
