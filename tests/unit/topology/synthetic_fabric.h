// Synthetic fat-tree fabrics printed in ibnetdiscover's text format, for the unit
// tests and the benchmark. Two tiers (leaves -> spines) or three (leaves -> pod
// aggregation -> cores), optionally rail-optimised (host HCA r on rail r's leaf).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace k8sbridge::topology::testing {

struct FabricSpec {
  std::string host_prefix = "w-";
  int hosts = 8;
  int rails = 1;  // HCAs per host, each on its own rail's leaf
  int hosts_per_leaf = 4;
  int groups_per_pod = 0;   // 0: two tiers; >0: leaf groups per pod (three tiers)
  int uplinks = 2;          // spines (2 tiers) / aggregation switches per pod (3 tiers)
  int cores_per_plane = 1;  // three tiers only
  uint64_t guid_base = 0x0002c90000000000;
  std::string hca_word = "mlx5_";
};

struct SynthNode {
  bool is_switch;
  uint64_t guid;
  std::string desc;
  std::vector<std::tuple<int, size_t, int>> ports;  // local port, remote node index, remote port
};

inline std::vector<SynthNode> SyntheticNodes(const FabricSpec& spec) {
  std::vector<SynthNode> nodes;
  uint64_t next_guid = spec.guid_base;
  auto add = [&](bool sw, std::string desc) {
    nodes.push_back({sw, next_guid, std::move(desc), {}});
    next_guid += 0x10;
    return nodes.size() - 1;
  };
  auto cable = [&](size_t a, size_t b) {
    int pa = static_cast<int>(nodes[a].ports.size()) + 1;
    int pb = static_cast<int>(nodes[b].ports.size()) + 1;
    nodes[a].ports.emplace_back(pa, b, pb);
    nodes[b].ports.emplace_back(pb, a, pa);
  };
  int groups = (spec.hosts + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
  int pods = spec.groups_per_pod > 0 ? (groups + spec.groups_per_pod - 1) / spec.groups_per_pod : 1;
  // leaf[g][r]
  std::vector<std::vector<size_t>> leaf(groups, std::vector<size_t>(spec.rails));
  for (int g = 0; g < groups; ++g) {
    for (int r = 0; r < spec.rails; ++r) {
      leaf[g][r] = add(true, fmt::format("leaf-{}-rail{}", g, r));
    }
  }
  // upper[pod][k]: spines (2 tiers) or pod aggregation switches (3 tiers), shared by
  // all rails: the rails are one fabric, as with a single subnet manager.
  std::vector<std::vector<size_t>> upper(pods);
  for (int p = 0; p < pods; ++p) {
    for (int k = 0; k < spec.uplinks; ++k) {
      upper[p].push_back(add(true, fmt::format("spine-{}-{}", p, k)));
    }
  }
  for (int g = 0; g < groups; ++g) {
    int p = spec.groups_per_pod > 0 ? g / spec.groups_per_pod : 0;
    for (int r = 0; r < spec.rails; ++r) {
      for (size_t up : upper[p]) {
        cable(leaf[g][r], up);
      }
    }
  }
  // Core planes: aggregation switch k of every pod goes to the cores of plane k.
  if (spec.groups_per_pod > 0) {
    for (int k = 0; k < spec.uplinks; ++k) {
      for (int c = 0; c < spec.cores_per_plane; ++c) {
        size_t core = add(true, fmt::format("core-{}-{}", k, c));
        for (int p = 0; p < pods; ++p) {
          cable(upper[p][k], core);
        }
      }
    }
  }
  for (int h = 0; h < spec.hosts; ++h) {
    int g = h / spec.hosts_per_leaf;
    for (int r = 0; r < spec.rails; ++r) {
      size_t ca = add(false, fmt::format("{}{} {}{}", spec.host_prefix, h, spec.hca_word, r));
      cable(ca, leaf[g][r]);
    }
  }
  return nodes;
}

inline std::string ToIbnetdiscover(const std::vector<SynthNode>& nodes) {
  std::string out = "#\n# Topology file: synthetic\n#\n\n";
  auto id = [](const SynthNode& n) {
    return fmt::format("{}-{:016x}", n.is_switch ? 'S' : 'H', n.guid);
  };
  for (bool switches : {true, false}) {
    for (const SynthNode& n : nodes) {
      if (n.is_switch != switches) {
        continue;
      }
      out += fmt::format("vendid=0x2c9\ndevid=0xd2f0\nsysimgguid={:#x}\n{}guid={:#x}({:x})\n",
                         n.guid, n.is_switch ? "switch" : "ca", n.guid, n.guid);
      int ports = std::max<int>(static_cast<int>(n.ports.size()), 1);
      if (n.is_switch) {
        out += fmt::format("Switch\t{} \"{}\"\t\t# \"{}\" base port 0 lid 1 lmc 0\n", ports, id(n),
                           n.desc);
      } else {
        out += fmt::format("Ca\t{} \"{}\"\t\t# \"{}\"\n", ports, id(n), n.desc);
      }
      for (const auto& [local, remote, remote_port] : n.ports) {
        const SynthNode& r = nodes[remote];
        if (n.is_switch) {
          out +=
              fmt::format("[{}]\t\"{}\"[{}]{}\t\t# \"{}\" lid 2 4xHDR\n", local, id(r), remote_port,
                          r.is_switch ? "" : fmt::format("({:x})", r.guid + 1), r.desc);
        } else {
          out += fmt::format("[{}]({:x}) \t\"{}\"[{}]\t\t# lid 2 lmc 0 \"{}\" lid 1 4xHDR\n", local,
                             n.guid + 1, id(r), remote_port, r.desc);
        }
      }
      out += "\n";
    }
  }
  return out;
}

inline std::string SyntheticIbnetdiscover(const FabricSpec& spec) {
  return ToIbnetdiscover(SyntheticNodes(spec));
}

}  // namespace k8sbridge::topology::testing
