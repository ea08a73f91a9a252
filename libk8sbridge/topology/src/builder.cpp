// Fabric graph -> switch hierarchy. See model.h for the rules; the reasons:
//  - Leaves are grouped by shared hosts because Slurm's tree plugin wants every
//    node under exactly one leaf; on a rail-optimised fabric the rail leaves of one
//    host group are one scheduling unit (traffic between those hosts never leaves
//    them), so folding them is exact, not an approximation.
//  - Tiers come from the distance to the hosts, which holds for 2- and 3-tier fat
//    trees and for rail fabrics whose spines are shared or per rail.
//  - Names come from the lowest GUID among the physical switches of a unit: they do
//    not depend on discovery order, and only change when that hardware changes.
#include <regex.h>
#include <algorithm>
#include <numeric>
#include <optional>

#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/topology/model.h"

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

// POSIX extended regular expressions (libc), compiled once. (std::regex trips
// GCC 12's -Wmaybe-uninitialized under sanitizers, and is slow.)
class PosixRegex {
 public:
  // `whole`: the expression must match the whole text.
  static Result<std::shared_ptr<PosixRegex>> Compile(const std::string& pattern,
                                                     std::string_view what, bool whole) {
    auto re = std::shared_ptr<PosixRegex>(new PosixRegex());
    std::string full = whole ? "^(" + pattern + ")$" : pattern;
    int rc = regcomp(&re->re_, full.c_str(), REG_EXTENDED);
    if (rc != 0) {
      char buf[256];
      regerror(rc, &re->re_, buf, sizeof(buf));
      return Status::InvalidArgument(fmt::format(
          "{} \"{}\" is not a valid POSIX extended regular expression: {}", what, pattern, buf));
    }
    re->compiled_ = true;
    return re;
  }
  ~PosixRegex() {
    if (compiled_) {
      regfree(&re_);
    }
  }
  PosixRegex(const PosixRegex&) = delete;
  PosixRegex& operator=(const PosixRegex&) = delete;

  size_t groups() const { return re_.re_nsub; }
  bool Matches(const std::string& text) const {
    return regexec(&re_, text.c_str(), 0, nullptr, 0) == 0;
  }
  // The first capture group of the first match; "" if none.
  std::string Capture(const std::string& text) const {
    regmatch_t m[2];
    if (regexec(&re_, text.c_str(), 2, m, 0) != 0 || m[1].rm_so < 0) {
      return "";
    }
    return text.substr(m[1].rm_so, m[1].rm_eo - m[1].rm_so);
  }

 private:
  PosixRegex() = default;
  regex_t re_{};
  bool compiled_ = false;
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

  // ---- switches and their links ------------------------------------------------
  // Indices in GUID order, so that every later step is independent of the order in
  // which the fabric was read.
  std::vector<uint64_t> sw_guid;
  std::vector<uint64_t> ca_guid;
  for (const auto& [guid, node] : graph.nodes()) {
    if (node.kind == NodeKind::kSwitch) {
      sw_guid.push_back(guid);
    } else if (node.kind == NodeKind::kCa) {
      ca_guid.push_back(guid);
    }
  }
  std::sort(sw_guid.begin(), sw_guid.end());
  std::sort(ca_guid.begin(), ca_guid.end());
  std::unordered_map<uint64_t, int> sw_index;
  sw_index.reserve(sw_guid.size());
  for (size_t i = 0; i < sw_guid.size(); ++i) {
    sw_index.emplace(sw_guid[i], static_cast<int>(i));
  }
  const int num_sw = static_cast<int>(sw_guid.size());
  std::vector<std::vector<int>> sw_adj(num_sw);
  for (int i = 0; i < num_sw; ++i) {
    for (uint64_t nb : graph.Neighbours(sw_guid[i])) {
      if (auto it = sw_index.find(nb); it != sw_index.end()) {
        sw_adj[i].push_back(it->second);
      }
    }
  }

  // ---- hosts: HCA descriptions -> Slurm node names -----------------------------
  std::map<std::string, std::vector<int>> host_sw;
  size_t unmapped = 0;
  std::string unmapped_example;
  for (uint64_t guid : ca_guid) {
    const FabricNode& node = graph.nodes().at(guid);
    std::string host;
    if (host_re) {
      host = host_re->Capture(node.description);
    } else {
      host = node.description.substr(0, node.description.find_first_of(" \t"));
    }
    if (!IsSlurmName(host)) {
      if (unmapped++ == 0) {
        unmapped_example = node.description;
      }
      continue;
    }
    auto& list = host_sw[host];
    for (uint64_t nb : graph.Neighbours(guid)) {
      if (auto it = sw_index.find(nb); it != sw_index.end()) {
        list.push_back(it->second);
      }
    }
  }
  if (unmapped > 0) {
    logger.Warning(
        "{} HCA(s) have a node description that gives no valid Slurm node name (e.g. \"{}\"); "
        "they are left out. Set host_regex if descriptions are not \"<node> <hca>\"",
        unmapped, unmapped_example);
  }

  std::set<std::string> all_nodes(options.all_nodes.begin(), options.all_nodes.end());
  std::set<std::string> cpu_only;
  for (auto it = host_sw.begin(); it != host_sw.end();) {
    const std::string& host = it->first;
    if (!all_nodes.empty() && !all_nodes.contains(host)) {
      logger.Debug("host {} is on the fabric but not a Slurm node; left out", host);
      it = host_sw.erase(it);
    } else if ((cpu_re && cpu_re->Matches(host)) || it->second.empty()) {
      // CPU-only by name, or an HCA with no switch behind it.
      cpu_only.insert(host);
      it = host_sw.erase(it);
    } else {
      ++it;
    }
  }
  // Hosts absent now keep the place they had, as long as their switches exist.
  for (const auto& [host, guids] : options.remembered) {
    if (host_sw.contains(host) || cpu_only.contains(host)) {
      continue;
    }
    if (!all_nodes.empty() && !all_nodes.contains(host)) {
      continue;
    }
    if (cpu_re && cpu_re->Matches(host)) {
      continue;
    }
    std::vector<int> list;
    for (uint64_t g : guids) {
      if (auto it = sw_index.find(g); it != sw_index.end()) {
        list.push_back(it->second);
      }
    }
    if (!list.empty()) {
      host_sw.emplace(host, std::move(list));
    }
  }
  for (const std::string& node : all_nodes) {
    if (!host_sw.contains(node)) {
      cpu_only.insert(node);
    }
  }

  // ---- separate fabrics: connected components of switches ------------------------
  std::vector<int> fabric_of(num_sw, -1);
  std::vector<uint64_t> fabric_min_guid;
  std::vector<int> fabric_size;
  for (int start = 0; start < num_sw; ++start) {
    if (fabric_of[start] >= 0) {
      continue;
    }
    int id = static_cast<int>(fabric_min_guid.size());
    fabric_min_guid.push_back(sw_guid[start]);
    fabric_size.push_back(0);
    std::vector<int> stack{start};
    fabric_of[start] = id;
    while (!stack.empty()) {
      int s = stack.back();
      stack.pop_back();
      ++fabric_size[id];
      fabric_min_guid[id] = std::min(fabric_min_guid[id], sw_guid[s]);
      for (int nb : sw_adj[s]) {
        if (fabric_of[nb] < 0) {
          fabric_of[nb] = id;
          stack.push_back(nb);
        }
      }
    }
  }
  // A host on two fabrics (e.g. compute and storage) belongs to the one holding
  // most of its HCAs; ties go to the larger fabric, then the lower GUID.
  for (auto& [host, list] : host_sw) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    std::map<int, int> count;
    for (int s : list) {
      ++count[fabric_of[s]];
    }
    if (count.size() > 1) {
      auto best = std::max_element(count.begin(), count.end(), [&](const auto& a, const auto& b) {
        // Fewer HCAs < more; then smaller fabric < larger; then higher GUID < lower.
        return std::tuple(a.second, fabric_size[a.first], fabric_min_guid[b.first]) <
               std::tuple(b.second, fabric_size[b.first], fabric_min_guid[a.first]);
      });
      int keep = best->first;
      std::erase_if(list, [&](int s) { return fabric_of[s] != keep; });
      logger.Info("host {} has HCAs on {} separate fabrics; placed on the one with switch {:#x}",
                  host, count.size(), fabric_min_guid[keep]);
    }
  }

  // ---- tiers: distance from the hosts -------------------------------------------
  std::vector<int> dist(num_sw, -1);
  std::vector<int> queue;
  for (const auto& [host, list] : host_sw) {
    for (int s : list) {
      if (dist[s] < 0) {
        dist[s] = 0;
        queue.push_back(s);
      }
    }
  }
  for (size_t q = 0; q < queue.size(); ++q) {
    for (int nb : sw_adj[queue[q]]) {
      if (dist[nb] < 0) {
        dist[nb] = dist[queue[q]] + 1;
        queue.push_back(nb);
      }
    }
  }

  // ---- leaves: leaf switches joined by shared hosts ------------------------------
  UnionFind leaf_uf(num_sw);
  for (const auto& [host, list] : host_sw) {
    for (size_t i = 1; i < list.size(); ++i) {
      leaf_uf.Join(list[0], list[i]);
    }
  }
  std::map<size_t, int> unit_of_root;  // union-find root -> unit index
  std::vector<Unit> units;
  std::vector<std::vector<int>> unit_members;
  for (int s : queue) {
    if (dist[s] != 0) {
      continue;
    }
    size_t root = leaf_uf.Find(s);
    auto [it, inserted] = unit_of_root.emplace(root, static_cast<int>(units.size()));
    if (inserted) {
      units.emplace_back();
      units.back().fabric = fabric_of[s];
    }
    units[it->second].frontier.push_back(s);
  }
  for (const auto& [host, list] : host_sw) {
    units[unit_of_root.at(leaf_uf.Find(list[0]))].nodes.push_back(host);
  }
  std::vector<TopoSwitch> out_switches;
  auto emit = [&](Unit& u) {
    std::sort(u.children.begin(), u.children.end());
    std::sort(u.nodes.begin(), u.nodes.end());
    std::sort(u.member_guids.begin(), u.member_guids.end());
    out_switches.push_back(TopoSwitch{u.name, u.tier, u.children, u.nodes, u.member_guids});
  };
  for (Unit& u : units) {
    std::sort(u.frontier.begin(), u.frontier.end());
    for (int s : u.frontier) {
      u.member_guids.push_back(sw_guid[s]);
    }
    u.name = fmt::format("{}1-{:x}", options.switch_prefix,
                         *std::min_element(u.member_guids.begin(), u.member_guids.end()));
    emit(u);
  }

  // ---- upper tiers: units sharing a switch one tier up merge ---------------------
  for (int tier = 1;; ++tier) {
    std::vector<std::vector<int>> upward(units.size());
    bool any = false;
    for (size_t u = 0; u < units.size(); ++u) {
      for (int s : units[u].frontier) {
        for (int nb : sw_adj[s]) {
          if (dist[nb] == tier) {
            upward[u].push_back(nb);
          }
        }
      }
      std::sort(upward[u].begin(), upward[u].end());
      upward[u].erase(std::unique(upward[u].begin(), upward[u].end()), upward[u].end());
      any = any || !upward[u].empty();
    }
    if (!any) {
      break;
    }
    UnionFind unit_uf(units.size());
    std::unordered_map<int, size_t> first_unit_of_switch;
    for (size_t u = 0; u < units.size(); ++u) {
      for (int s : upward[u]) {
        auto [it, inserted] = first_unit_of_switch.emplace(s, u);
        if (!inserted) {
          unit_uf.Join(it->second, u);
        }
      }
    }
    std::map<size_t, std::vector<size_t>> groups;
    for (size_t u = 0; u < units.size(); ++u) {
      groups[unit_uf.Find(u)].push_back(u);
    }
    std::vector<Unit> next;
    for (auto& [root, members] : groups) {
      std::vector<int> frontier;
      for (size_t u : members) {
        frontier.insert(frontier.end(), upward[u].begin(), upward[u].end());
      }
      std::sort(frontier.begin(), frontier.end());
      frontier.erase(std::unique(frontier.begin(), frontier.end()), frontier.end());
      if (members.size() == 1) {
        // Nothing merges here: the unit goes on up through these switches as itself.
        Unit carried = std::move(units[members[0]]);
        carried.frontier = std::move(frontier);
        next.push_back(std::move(carried));
        continue;
      }
      Unit merged;
      merged.tier = tier + 1;
      merged.fabric = units[members[0]].fabric;
      merged.frontier = std::move(frontier);
      for (int s : merged.frontier) {
        merged.member_guids.push_back(sw_guid[s]);
      }
      int child_tier = 0;
      for (size_t u : members) {
        merged.children.push_back(units[u].name);
        child_tier = std::max(child_tier, units[u].tier);
      }
      merged.tier = std::max(tier + 1, child_tier + 1);
      merged.name =
          fmt::format("{}{}-{:x}", options.switch_prefix, tier + 1,
                      *std::min_element(merged.member_guids.begin(), merged.member_guids.end()));
      emit(merged);
      next.push_back(std::move(merged));
    }
    units = std::move(next);
  }

  // ---- one root per fabric --------------------------------------------------------
  Topology topo;
  std::map<int, std::vector<size_t>> by_fabric;
  for (size_t u = 0; u < units.size(); ++u) {
    by_fabric[units[u].fabric].push_back(u);
  }
  for (auto& [fabric, members] : by_fabric) {
    if (members.size() == 1) {
      topo.roots.push_back(units[members[0]].name);
      continue;
    }
    // Units of one fabric that no upper switch joins (e.g. leaves cabled directly
    // to each other): a synthetic root keeps them in one fabric for Slurm.
    Unit root;
    root.fabric = fabric;
    for (size_t u : members) {
      root.children.push_back(units[u].name);
      root.tier = std::max(root.tier, units[u].tier + 1);
    }
    root.name = fmt::format("{}root-{:x}", options.switch_prefix, fabric_min_guid[fabric]);
    emit(root);
    topo.roots.push_back(root.name);
  }
  if (!cpu_only.empty()) {
    if (options.cpu_only == CpuOnlyPolicy::kOwnRoot) {
      Unit cpu;
      cpu.name = options.cpu_only_switch;
      cpu.nodes.assign(cpu_only.begin(), cpu_only.end());
      emit(cpu);
      topo.roots.push_back(cpu.name);
    } else {
      logger.Info("{} CPU-only node(s) left out of the topology: {}", cpu_only.size(),
                  CompressHostlist({cpu_only.begin(), cpu_only.end()}));
    }
  }
  std::sort(topo.roots.begin(), topo.roots.end());
  std::sort(out_switches.begin(), out_switches.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tier, a.name) < std::tie(b.tier, b.name);
  });
  topo.switches = std::move(out_switches);
  for (const auto& [host, list] : host_sw) {
    std::vector<uint64_t>& guids = topo.attachments[host];
    for (int s : list) {
      guids.push_back(sw_guid[s]);
    }
    std::sort(guids.begin(), guids.end());
  }
  return topo;
}

}  // namespace k8sbridge::topology
