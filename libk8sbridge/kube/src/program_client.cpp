#include "k8sbridge/kube/program_client.h"

#include <fmt/format.h>

#include "k8sbridge/kube/config.h"

namespace k8sbridge::kube {

ClientOptions ProgramClientOptions(const conf::KubeConf& kube, Logger& log) {
  ClientOptions options;
  options.logger = &log;
  options.qps = kube.qps;
  options.burst = kube.burst;
  options.connect_timeout = kube.connect_timeout;
  options.request_timeout = kube.request_timeout;
  return options;
}

Result<std::unique_ptr<Client>> MakeClient(const conf::KubeConf& kube, std::string_view conf_file,
                                           const ClientOptions& options) {
  auto config =
      ProgramConfig(kube.kubeconfig, kube.context, kube.in_cluster, kube.allow_insecure_http);
  if (!config.ok())
    return config.status().WithContext(fmt::format("{}: Kubernetes connection", conf_file));
  return Client::Create(*config, options);
}

}  // namespace k8sbridge::kube
