#include "k8sbridge/topology/live.h"

#include <infiniband/ibnetdisc.h>

#include <memory>

#include <fmt/format.h>

namespace k8sbridge::topology {

namespace {

// ibnetdiscover prints descriptions with unprintable bytes blanked; do the same so
// that a live scan and a dump of the same fabric compare equal.
std::string CleanDescription(const char* raw) {
  std::string out;
  for (const char* p = raw; *p != '\0'; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    out += (c < 0x20 || c > 0x7e) ? ' ' : static_cast<char>(c);
  }
  return out;
}

}  // namespace

Result<FabricGraph> DiscoverFabric(const LiveOptions& options) {
  ibnd_config_t config{};
  config.timeout_ms = options.timeout_ms;
  std::string ca = options.ca_name;
  std::unique_ptr<ibnd_fabric_t, decltype(&ibnd_destroy_fabric)> fabric(
      ibnd_discover_fabric(ca.empty() ? nullptr : ca.data(), options.ca_port, nullptr, &config),
      &ibnd_destroy_fabric);
  if (!fabric) {
    return Status::Unavailable(fmt::format(
        "InfiniBand discovery from CA {} port {} failed; check that the HCA is up (ibstat) and "
        "that this user may open /dev/infiniband/umad*",
        ca.empty() ? "(first)" : ca, options.ca_port));
  }
  FabricGraph graph;
  for (ibnd_node_t* node = fabric->nodes; node != nullptr; node = node->next) {
    NodeKind kind;
    switch (node->type) {
      case IB_NODE_SWITCH:
        kind = NodeKind::kSwitch;
        break;
      case IB_NODE_CA:
        kind = NodeKind::kCa;
        break;
      case IB_NODE_ROUTER:
        kind = NodeKind::kRouter;
        break;
      default:
        continue;
    }
    if (Status s =
            graph.AddNode({node->guid, kind, node->numports, CleanDescription(node->nodedesc)});
        !s.ok()) {
      return s;
    }
  }
  for (ibnd_node_t* node = fabric->nodes; node != nullptr; node = node->next) {
    for (int p = 1; p <= node->numports; ++p) {
      ibnd_port_t* port = node->ports ? node->ports[p] : nullptr;
      if (port == nullptr || port->remoteport == nullptr || port->remoteport->node == nullptr) {
        continue;
      }
      ibnd_port_t* remote = port->remoteport;
      if (!graph.nodes().contains(remote->node->guid)) {
        continue;
      }
      if (Status s = graph.AddLink(
              MakeLink(node->guid, port->portnum, remote->node->guid, remote->portnum));
          !s.ok()) {
        return s;
      }
    }
  }
  return graph;
}

}  // namespace k8sbridge::topology
