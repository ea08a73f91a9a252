#include "kube_nodes.h"

#include <fmt/format.h>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/kube/program_client.h"

namespace k8sbridge::topology {

Result<TopologyConf> LoadTopologyConf(const std::string& conf_path) {
  TopologyConf loaded;
  loaded.source = "--kube (give --config k8sbridge.conf, run in a pod, or set KUBECONFIG)";
  if (conf_path.empty())
    return loaded;
  BuiltinHostlists hostlists;
  auto conf = conf::LoadBridgeConfig(conf_path, hostlists);
  if (!conf.ok())
    return conf.status().WithContext("--config");
  loaded.connection = conf->kube;
  loaded.source = conf->file;
  for (const conf::NodeGroup& group : conf->node_groups) {
    loaded.slurm_nodes.insert(loaded.slurm_nodes.end(), group.nodes.begin(), group.nodes.end());
    if (!group.placement_domain.empty()) {
      loaded.pinned.push_back(
          DomainGroup{group.name, group.nodes, group.placement_label, group.placement_domain});
    }
  }
  return loaded;
}

Result<std::unique_ptr<kube::Client>> MakeNodeClient(const TopologyConf& conf, Logger& log) {
  // The client's own rate limit and time-outs: a run makes a LIST or one watch.
  kube::ClientOptions options;
  options.logger = &log;
  return kube::MakeClient(conf.connection, conf.source, options);
}

Status ExplainNodeCall(const Status& failed, std::string_view verb, std::string_view server) {
  const int code = kube::HttpCode(failed);
  if (code == 403 || failed.code() == Status::Code::kPermissionDenied) {
    return Status::PermissionDenied(fmt::format(
        "{}: the account needs \"{}\" on nodes (cluster-scoped, API group \"\"); grant it with a "
        "ClusterRole as deploy/base/rbac.yaml's k8sbridge-controller-nodes does",
        failed.message(), verb));
  }
  if (code == 401 || failed.code() == Status::Code::kUnauthenticated) {
    return Status::Unauthenticated(fmt::format(
        "{}: {} refused the credentials; check the kubeconfig's user or the ServiceAccount token",
        failed.message(), server));
  }
  return failed.WithContext(fmt::format("{} nodes at {}", verb, server));
}

std::vector<LabeledNode> LabeledNodesOf(const std::vector<kube::Object>& items) {
  std::vector<LabeledNode> nodes;
  nodes.reserve(items.size());
  for (const kube::Object& item : items) {
    nodes.push_back(LabeledNode{item.Name(), item.Labels()});
  }
  return nodes;
}

Result<std::vector<LabeledNode>> ListLabeledNodes(kube::Client& client) {
  auto listed = kube::Nodes(client).List();
  if (!listed.ok()) {
    return ExplainNodeCall(listed.status(), "list", client.config().server);
  }
  return LabeledNodesOf(listed->items);
}

NodeWatch::NodeWatch(std::unique_ptr<kube::Client> client) : client_(std::move(client)) {}

NodeWatch::~NodeWatch() {
  if (informer_) {
    informer_->Stop();
  }
}

Result<std::unique_ptr<NodeWatch>> NodeWatch::Start(std::unique_ptr<kube::Client> client,
                                                    std::chrono::milliseconds sync_timeout) {
  const std::string server = client->config().server;
  auto listed = client->List(kube::kNodes, "", {});
  if (!listed.ok()) {
    return ExplainNodeCall(listed.status(), "list", server);
  }
  // A watch that the server closes after a second: proves the verb before the
  // informer would retry a refused watch for ever.
  kube::WatchOptions probe;
  probe.resource_version = listed->resource_version;
  probe.timeout_seconds = 1;
  probe.allow_bookmarks = false;
  auto watched =
      client->Watch(kube::kNodes, "", probe, [](const kube::WatchEvent&) { return false; });
  if (!watched.ok()) {
    return ExplainNodeCall(watched.status(), "watch", server);
  }
  std::unique_ptr<NodeWatch> watch(new NodeWatch(std::move(client)));
  watch->informer_ = std::make_unique<kube::Informer>(*watch->client_, kube::kNodes);
  watch->informer_->Start();
  if (!watch->informer_->WaitForSync(sync_timeout)) {
    return Status::Unavailable(
        fmt::format("nodes at {} not listed within {} s", server, sync_timeout.count() / 1000));
  }
  return watch;
}

Result<std::vector<LabeledNode>> NodeWatch::Nodes() const {
  if (!informer_->IsHealthy()) {
    return Status::Unavailable(
        fmt::format("the list and watch of nodes at {} is failing (see the warnings above); "
                    "topology.conf is left as it is until it works again",
                    client_->config().server));
  }
  return LabeledNodesOf(informer_->List());
}

}  // namespace k8sbridge::topology
