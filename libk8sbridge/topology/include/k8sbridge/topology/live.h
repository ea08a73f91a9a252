// Live fabric discovery through libibnetdisc (the library behind ibnetdiscover),
// from a local HCA port. Lives in its own small library (k8sbridge_ibdisc) so that
// only programs that scan a fabric link libibnetdisc/libibmad/libibumad.
#pragma once

#include <string>

#include "k8sbridge/status.h"
#include "k8sbridge/topology/fabric.h"

namespace k8sbridge::topology {

struct LiveOptions {
  std::string ca_name;      // empty: the first CA
  int ca_port = 0;          // 0: the first active port
  unsigned timeout_ms = 0;  // per MAD; 0: libibnetdisc's default
};

// Scans the fabric reachable from the given port. Needs read/write access to
// /dev/infiniband/umad* (root, or the rdma group), or ibsim's umad2sim preload.
Result<FabricGraph> DiscoverFabric(const LiveOptions& options);

}  // namespace k8sbridge::topology
