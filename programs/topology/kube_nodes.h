// k8sbridge-topology --kube: the Kubernetes nodes' tiered topology labels, read from
// the API server (in-cluster ServiceAccount or a kubeconfig) instead of a
// `kubectl get nodes -o json` file. The labels become a hierarchy exactly as with
// --labels FILE (topology::TopologyFromLabels): this file only reads them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "k8sbridge/topology/model.h"

namespace k8sbridge::topology {

// The API server's client and, from k8sbridge.conf, which nodes are Slurm's.
struct KubeSetup {
  std::unique_ptr<kube::Client> client;
  std::vector<std::string> slurm_nodes;  // the NodeGroups' nodes; empty without a conf
};

// With `conf_path`: k8sbridge.conf's Kubernetes keys (Kubeconfig, KubeContext,
// InCluster, AllowInsecureHttp) and its NodeGroups' nodes. Without: in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config, as a
// k8sbridge.conf without those keys. The client logs to `log`.
Result<KubeSetup> LoadKubeSetup(const std::string& conf_path, Logger& log);

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
