// Pod networking for the kubesim kubelet: one Linux bridge per stand-in, one veth pair
// per pod, addresses and routes set with ioctls, the veth made with one rtnetlink
// request. No `ip` command is run: `ip netns exec` remounts /sys, which would hide the
// host's /sys/fs/cgroup from pods that later run slurmd.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;
using k8sbridge::Status;

// An IPv4 network such as 10.232.0.0/24: the first host address is the bridge (the pods'
// gateway), the others go to pods.
struct PodNetwork {
  uint32_t network = 0;  // host byte order
  int prefix = 24;
  uint32_t Gateway() const { return network + 1; }
  uint32_t Broadcast() const { return network | (prefix == 32 ? 0 : (~0u >> prefix)); }
};
// "10.232.0.0/24" -> PodNetwork; kInvalidArgument names the text and the fix. Prefixes
// from /16 to /29.
Result<PodNetwork> ParsePodNetwork(const std::string& cidr);
std::string FormatIPv4(uint32_t address);  // host byte order -> "10.232.0.5"

// Hands out pod addresses round-robin, so a freed address is not reused at once.
class IpAllocator {
 public:
  explicit IpAllocator(PodNetwork network) : network_(network), next_(network.Gateway() + 1) {}
  std::optional<uint32_t> Allocate();
  void Release(uint32_t address) { used_.erase(address); }

 private:
  PodNetwork network_;
  uint32_t next_;
  std::set<uint32_t> used_;
};

// Interface names are at most 15 characters; kInvalidArgument otherwise.
Status CheckInterfaceName(const std::string& name);
bool InterfaceExists(const std::string& name);

// Creates the bridge if missing, gives it the gateway address and brings it up.
Status EnsureBridge(const std::string& bridge, const PodNetwork& network);
// Brings the bridge down and deletes it; OK when it is already gone.
Status DeleteBridge(const std::string& bridge);
// Deletes a link by name (a pod's host-side veth); OK when it is already gone.
Status DeleteLink(const std::string& name);

// ---- Used by kubesim-podrun, the process that becomes the pod --------------------------
// `host_netlink` and `host_ioctl` are sockets opened in the host's network namespace
// before the caller unshared its own; the pod side ends up as "eth0" in `pod_netns_fd`.
Status CreatePodVeth(int host_netlink, int host_ioctl, const std::string& host_name,
                     int pod_netns_fd, const std::string& bridge);
// In the pod's namespace: lo up, eth0 with `address`/prefix, default route via gateway.
Status ConfigurePodInterface(uint32_t address, int prefix, uint32_t gateway);

}  // namespace kubesim
