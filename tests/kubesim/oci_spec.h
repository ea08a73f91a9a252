// The OCI runtime spec (a runc bundle's config.json) the kubesim kubelet generates for
// one container of a pod, as containerd's CRI plugin builds it: containerd's default
// Unix spec (pkg/oci/spec.go: mounts, capabilities, masked and read-only paths),
// the pod's shared network, UTS and IPC namespaces, privileged and capability rules
// (pkg/cri/opts/spec_linux.go), and the argv/env merge of Kubernetes
// (pkg/kubelet/kuberuntime/kuberuntime_container.go, third_party/forked/golang/expansion).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "k8sbridge/status.h"
#include "oci_image.h"

namespace kubesim::oci {

// The process's argv from the image and the container: `command` replaces Entrypoint
// and drops Cmd; `args` replaces Cmd. (nullopt = not set in the pod.)
std::vector<std::string> MergeArgv(const ImageConfig& image,
                                   const std::optional<std::vector<std::string>>& command,
                                   const std::optional<std::vector<std::string>>& args);
// The image's Env ("K=V") overlaid with the container's variables, in order; a later
// value of the same name replaces the earlier one in place.
std::vector<std::string> MergeEnv(const std::vector<std::string>& image_env,
                                  const std::vector<std::pair<std::string, std::string>>& env);

// containerd's default capability set.
std::vector<std::string> DefaultCapabilities();
// `add`/`drop` as in a securityContext (names with or without CAP_, any case; ALL):
// ALL in add gives `all`, ALL in drop starts from none, then add, then drop.
std::vector<std::string> ApplyCapabilities(std::vector<std::string> base,
                                           const std::vector<std::string>& add,
                                           const std::vector<std::string>& drop,
                                           const std::vector<std::string>& all);
// The capabilities in this process's bounding set (what privileged containers get,
// as containerd's WithAllCurrentCapabilities).
std::vector<std::string> CurrentCapabilities();

// The image's User ("uid", "uid:gid", "name", "name:group", "") resolved against the
// rootfs's /etc/passwd and /etc/group, then runAsUser/runAsGroup on top.
struct UserIds {
  uint32_t uid = 0, gid = 0;
};
Result<UserIds> ResolveUser(const std::string& image_user, std::optional<int64_t> run_as_user,
                            std::optional<int64_t> run_as_group, const std::string& rootfs);

struct SpecMount {
  std::string source, destination;
  bool read_only = false;
  std::string propagation;  // "", "rslave" (HostToContainer), "rshared" (Bidirectional)
};
struct SpecDevice {
  std::string path;
  char type = 'c';
  int64_t major = 0, minor = 0;
  uint32_t mode = 0666;
};
struct SpecInput {
  std::vector<std::string> args, env;
  std::string cwd = "/";
  UserIds user;
  std::vector<uint32_t> additional_gids;
  std::string hostname;
  std::string rootfs;
  bool read_only_root = false;
  bool privileged = false;
  std::vector<std::string> capabilities;
  // Namespace paths to join (the pod sandbox's); an empty one is a new namespace.
  std::string netns, utsns, ipcns, pidns;
  std::vector<SpecMount> mounts;    // volumes, /etc/hosts ... after the defaults
  std::vector<SpecDevice> devices;  // privileged: the host's devices
};
// config.json for runc.
std::string BuildRuntimeSpec(const SpecInput& in);
// The host's device nodes under /dev, as containerd's privileged containers get them.
std::vector<SpecDevice> HostDevices();

}  // namespace kubesim::oci
