// Where the API server is and how to authenticate: from a kubeconfig (KUBECONFIG
// may list several files, first one to set a key wins) or from the pod's service
// account (in-cluster). Every error names the file, the field and what is wrong.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/contract.h"
#include "k8sbridge/status.h"

namespace k8sbridge::kube {

// users[].user.exec: a client.authentication.k8s.io/v1 credential plugin.
struct ExecConfig {
  std::string command;  // resolved against the kubeconfig's directory if relative with a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version = "client.authentication.k8s.io/v1";
  std::string source;  // "<file>: users[<name>].exec", for error messages
  bool empty() const { return command.empty(); }
};

struct Config {
  std::string server;  // https://host:port, no trailing slash
  std::string tls_server_name;
  std::string proxy_url;  // clusters[].cluster.proxy-url: http://, https:// or socks5://
  bool insecure_skip_tls_verify = false;
  std::string ca_file;  // PEM file, or
  std::string ca_pem;   // PEM text (certificate-authority-data)
  std::string client_cert_file, client_cert_pem;
  std::string client_key_file, client_key_pem;
  std::string token;       // static bearer token
  std::string token_file;  // re-read at least every minute and on a 401
  ExecConfig exec;
  std::string namespace_ = "default";
  std::string source;  // what this config came from, for messages
};

// Parses one kubeconfig document. `file` is used in messages and to resolve
// relative paths. Used by LoadKubeconfig and by the fuzz target.
struct KubeconfigFile {
  std::string file;
  std::string current_context;
  struct Cluster {
    std::string server, ca_file, ca_pem, tls_server_name, proxy_url;
    bool insecure = false;
  };
  struct User {
    std::string cert_file, cert_pem, key_file, key_pem, token, token_file;
    ExecConfig exec;
  };
  struct Context {
    std::string cluster, user, namespace_;
  };
  std::map<std::string, Cluster> clusters;
  std::map<std::string, User> users;
  std::map<std::string, Context> contexts;
};
Result<KubeconfigFile> ParseKubeconfig(std::string_view yaml, std::string_view file);

// Loads kubeconfig files (in order; first to set a key wins) and resolves
// `context` (empty: current-context). With no files, uses $KUBECONFIG, else
// ~/.kube/config. An http:// server is refused unless `allow_insecure_http`
// (k8sbridge.conf's AllowInsecureHttp=yes): the bearer token would travel in clear.
Result<Config> LoadKubeconfig(const std::vector<std::string>& files, std::string_view context = "",
                              bool allow_insecure_http = false);
// Splits a KUBECONFIG value on ':'.
std::vector<std::string> SplitKubeconfigEnv(std::string_view value);

// In-cluster: KUBERNETES_SERVICE_HOST/_PORT and the service account directory.
// `sa_dir` is contract::kServiceAccountDir outside tests.
Result<Config> InClusterConfig(std::string_view host, std::string_view port,
                               std::string_view sa_dir = contract::kServiceAccountDir);
// KUBERNETES_SERVICE_HOST/_PORT from the environment, else from `service_file`
// (KEY=VALUE lines; contract::kInClusterServiceFile outside tests), which the
// controller entrypoint writes for programs that slurmctld starts with a bare
// environment.
Result<Config> InClusterConfigFromEnv(
    std::string_view service_file = contract::kInClusterServiceFile,
    std::string_view sa_dir = contract::kServiceAccountDir);

// The connection rule every k8sbridge program follows: in-cluster when asked, or
// when no kubeconfig is named and KUBERNETES_SERVICE_HOST is set; else the named
// kubeconfig; else $KUBECONFIG or ~/.kube/config.
Result<Config> ProgramConfig(const std::string& kubeconfig, const std::string& context,
                             bool in_cluster, bool allow_insecure_http = false);

// Decodes base64 (the *-data fields); errors name `what`.
Result<std::string> DecodeBase64(std::string_view in, std::string_view what);

}  // namespace k8sbridge::kube
