// The client of a k8sbridge program or plugin: the API server that
// k8sbridge.conf's Kubernetes keys name, found by ProgramConfig's rule, and the
// rate limit and time-outs those keys set. Every program and plugin that has a
// k8sbridge.conf makes its client here.
#pragma once

#include <memory>
#include <string_view>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::kube {

// KubeQPS, KubeBurst, KubeConnectTimeout and KubeRequestTimeout, logging to `log`:
// the options a program starts from before it sets what is its own (retries,
// metrics).
ClientOptions ProgramClientOptions(const conf::KubeConf& kube, Logger& log);

// A client with `options` of the API server that Kubeconfig, KubeContext, InCluster
// and AllowInsecureHttp name (ProgramConfig). A server that cannot be found is an
// error naming `conf_file`'s Kubernetes connection.
Result<std::unique_ptr<Client>> MakeClient(const conf::KubeConf& kube, std::string_view conf_file,
                                           const ClientOptions& options);

}  // namespace k8sbridge::kube
