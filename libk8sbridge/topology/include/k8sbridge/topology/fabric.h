// The canonical InfiniBand fabric graph: every fabric source (ibnetdiscover text
// files, live discovery through libibnetdisc) produces one of these, and the tree
// builder reads only this. Nodes are keyed by node GUID, so two views of the same
// fabric (two dump files, or a file and a live scan) merge instead of duplicating.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::topology {

enum class NodeKind { kSwitch, kCa, kRouter };
std::string_view NodeKindName(NodeKind kind);

struct FabricNode {
  uint64_t guid = 0;
  NodeKind kind = NodeKind::kCa;
  int num_ports = 0;
  std::string description;  // the node description, e.g. "w-0 mlx5_0"
  friend bool operator==(const FabricNode&, const FabricNode&) = default;
};

// One cable. Stored with (guid_a, port_a) < (guid_b, port_b) so that both ends'
// records of the same cable compare equal.
struct FabricLink {
  uint64_t guid_a = 0;
  int port_a = 0;
  uint64_t guid_b = 0;
  int port_b = 0;
  friend auto operator<=>(const FabricLink&, const FabricLink&) = default;
};
FabricLink MakeLink(uint64_t guid_a, int port_a, uint64_t guid_b, int port_b);

class FabricGraph {
 public:
  // Adds or merges a node. A GUID seen before with another kind is an error (two
  // sources disagree about the fabric); an empty description is filled in later.
  Status AddNode(const FabricNode& node);
  // Adds a cable; both ends must be added nodes. Duplicates are ignored; a port
  // that would be cabled to two different places is an error (a corrupt dump).
  Status AddLink(const FabricLink& link);
  // Merges another graph (e.g. a second fabric, or the same fabric seen from
  // elsewhere) into this one.
  Status Merge(const FabricGraph& other);

  // Unordered for speed on large fabrics: sort (or use CanonicalDump) where order
  // matters.
  const std::unordered_map<uint64_t, FabricNode>& nodes() const { return nodes_; }
  // Pre-sizes the tables for a fabric of about this many nodes and cables.
  void Reserve(size_t nodes, size_t links);
  std::vector<FabricLink> links() const;
  // Neighbour GUIDs of a node (deduplicated, sorted).
  const std::vector<uint64_t>& Neighbours(uint64_t guid) const;

  // A sorted text form of the whole graph, one record per line; two graphs are
  // the same fabric exactly when their dumps are equal.
  std::string CanonicalDump() const;

  friend bool operator==(const FabricGraph& a, const FabricGraph& b) {
    return a.nodes_ == b.nodes_ && a.links_ == b.links_;
  }

 private:
  struct LinkHash {
    size_t operator()(const FabricLink& l) const {
      uint64_t h = l.guid_a * 0x9e3779b97f4a7c15ULL ^ (l.guid_b + 0x7f4a7c159e3779b9ULL);
      return std::hash<uint64_t>()(h ^ (static_cast<uint64_t>(l.port_a) << 8) ^
                                   static_cast<uint64_t>(l.port_b));
    }
  };
  std::unordered_map<uint64_t, FabricNode> nodes_;
  std::unordered_set<FabricLink, LinkHash> links_;
  std::unordered_map<uint64_t, std::vector<uint64_t>> neighbours_;
  struct PortKey {
    uint64_t guid;
    int port;
    friend bool operator==(const PortKey&, const PortKey&) = default;
  };
  struct PortKeyHash {
    size_t operator()(const PortKey& k) const {
      return std::hash<uint64_t>()(k.guid * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(k.port));
    }
  };
  std::unordered_map<PortKey, PortKey, PortKeyHash> peer_;
};

// Parses the default text output of `ibnetdiscover` (node headers, port lines,
// vendid=/devid=/sysimgguid=/switchguid=/caguid= lines, comments). The input is
// untrusted: any malformed line gives kInvalidArgument naming `source`, the line
// number and what was expected there. Links to nodes the dump never describes
// (a truncated dump) are reported as errors too.
Result<FabricGraph> ParseIbnetdiscover(std::string_view text, std::string_view source);

}  // namespace k8sbridge::topology
