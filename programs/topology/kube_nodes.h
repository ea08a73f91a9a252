// k8sbridge-topology --kube: the Kubernetes nodes' tiered topology labels, read from
// the API server (in-cluster ServiceAccount or a kubeconfig) instead of a
// `kubectl get nodes -o json` file. The labels become a hierarchy exactly as with
// --labels FILE (topology::TopologyFromLabels): this file only reads them, and
// k8sbridge.conf's Slurm nodes and pinned node groups (--config).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "k8sbridge/topology/model.h"

namespace k8sbridge::topology {

// What k8sbridge-topology reads from k8sbridge.conf (--config).
struct TopologyConf {
  std::string source;  // the file, or how to give one, for the client's messages
  // Kubeconfig, KubeContext, InCluster, AllowInsecureHttp. Without a conf: in-cluster
  // when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config.
  conf::KubeConf connection;
  std::vector<std::string> slurm_nodes;  // the NodeGroups' nodes; empty without a conf
  std::vector<DomainGroup> pinned;       // the NodeGroups with a PlacementDomain=
};

// Reads `conf_path`; "" gives a conf without keys.
Result<TopologyConf> LoadTopologyConf(const std::string& conf_path);

// The API server's client for `conf`'s connection; it logs to `log`.
Result<std::unique_ptr<kube::Client>> MakeNodeClient(const TopologyConf& conf, Logger& log);

// A failed call on nodes, with what to do: the permission a 403 lacks, the
// credentials a 401 refused, the server that did not answer.
Status ExplainNodeCall(const Status& failed, std::string_view verb, std::string_view server);

// Each node's name and labels.
std::vector<LabeledNode> LabeledNodesOf(const std::vector<kube::Object>& items);

// One LIST of every node (a single run).
Result<std::vector<LabeledNode>> ListLabeledNodes(kube::Client& client);

// The long-running source: checks once that nodes can be listed and watched (so a
// missing RBAC verb stops the start with the permission named), then keeps an
// informer's cache, which every refresh reads without waiting for the network.
class NodeWatch {
 public:
  static Result<std::unique_ptr<NodeWatch>> Start(std::unique_ptr<kube::Client> client,
                                                  std::chrono::milliseconds sync_timeout);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;
  // The cached nodes; an error while the watch is failing (nothing is rewritten
  // from a cache that may be stale).
  Result<std::vector<LabeledNode>> Nodes() const;

 private:
  explicit NodeWatch(std::unique_ptr<kube::Client> client);
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Informer> informer_;
};

}  // namespace k8sbridge::topology
