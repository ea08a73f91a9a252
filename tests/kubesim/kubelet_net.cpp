#include "kubelet_net.h"

#include <arpa/inet.h>
#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <linux/veth.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kubesim {
namespace {

std::string Errno(int err) {
  return std::strerror(err);
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void FillIfreq(ifreq& ifr, const std::string& name) {
  std::memset(&ifr, 0, sizeof(ifr));
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
}

Status SetUp(int sock, const std::string& name, bool up) {
  ifreq ifr;
  FillIfreq(ifr, name);
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) {
    return Status::IoError(fmt::format("reading flags of {}: {}", name, Errno(errno)));
  }
  if (up) {
    ifr.ifr_flags |= IFF_UP;
  } else {
    ifr.ifr_flags &= ~IFF_UP;
  }
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) {
    return Status::IoError(
        fmt::format("setting {} {}: {}", name, up ? "up" : "down", Errno(errno)));
  }
  return Status::Ok();
}

sockaddr_in Sin(uint32_t address) {
  sockaddr_in sin;
  std::memset(&sin, 0, sizeof(sin));
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(address);
  return sin;
}

Status SetAddress(int sock, const std::string& name, uint32_t address, int prefix) {
  ifreq ifr;
  FillIfreq(ifr, name);
  sockaddr_in sin = Sin(address);
  std::memcpy(&ifr.ifr_addr, &sin, sizeof(sin));
  if (ioctl(sock, SIOCSIFADDR, &ifr) != 0) {
    return Status::IoError(
        fmt::format("setting address {} on {}: {}", FormatIPv4(address), name, Errno(errno)));
  }
  FillIfreq(ifr, name);
  sin = Sin(prefix == 0 ? 0 : ~0u << (32 - prefix));
  std::memcpy(&ifr.ifr_netmask, &sin, sizeof(sin));
  if (ioctl(sock, SIOCSIFNETMASK, &ifr) != 0) {
    return Status::IoError(fmt::format("setting netmask on {}: {}", name, Errno(errno)));
  }
  return Status::Ok();
}

// Appends an rtnetlink attribute; returns a pointer to it (for nesting).
rtattr* AddAttr(nlmsghdr* msg, size_t capacity, int type, const void* data, size_t len) {
  const size_t attr_len = RTA_LENGTH(len);
  if (NLMSG_ALIGN(msg->nlmsg_len) + RTA_ALIGN(attr_len) > capacity)
    return nullptr;
  auto* attr =
      reinterpret_cast<rtattr*>(reinterpret_cast<char*>(msg) + NLMSG_ALIGN(msg->nlmsg_len));
  attr->rta_type = type;
  attr->rta_len = attr_len;
  if (len > 0)
    std::memcpy(RTA_DATA(attr), data, len);
  msg->nlmsg_len = NLMSG_ALIGN(msg->nlmsg_len) + RTA_ALIGN(attr_len);
  return attr;
}

void EndNest(nlmsghdr* msg, rtattr* nest) {
  nest->rta_len = reinterpret_cast<char*>(msg) + msg->nlmsg_len - reinterpret_cast<char*>(nest);
}

// Sends one request and waits for the kernel's ack.
Status Transact(int sock, nlmsghdr* msg, const std::string& what) {
  static uint32_t seq = 0;
  msg->nlmsg_seq = ++seq;
  sockaddr_nl kernel;
  std::memset(&kernel, 0, sizeof(kernel));
  kernel.nl_family = AF_NETLINK;
  if (sendto(sock, msg, msg->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) <
      0) {
    return Status::IoError(fmt::format("{}: sending to rtnetlink: {}", what, Errno(errno)));
  }
  alignas(nlmsghdr) char reply[4096];
  for (;;) {
    ssize_t n = recv(sock, reply, sizeof(reply), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return Status::IoError(fmt::format("{}: reading rtnetlink: {}", what, Errno(errno)));
    for (auto* h = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(h, static_cast<unsigned>(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != msg->nlmsg_seq)
        continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        if (err->error == 0)
          return Status::Ok();
        if (-err->error == EEXIST) {
          return Status::AlreadyExists(fmt::format("{}: {}", what, Errno(-err->error)));
        }
        return Status::IoError(fmt::format("{}: {}", what, Errno(-err->error)));
      }
    }
  }
}

}  // namespace

Result<PodNetwork> ParsePodNetwork(const std::string& cidr) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format(
        "pod network \"{}\" is not valid ({}): give an IPv4 network with a prefix from /16 to "
        "/29, such as 10.232.0.0/24",
        cidr, why));
  };
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos)
    return bad("no /prefix");
  in_addr addr;
  if (inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &addr) != 1)
    return bad("bad address");
  int prefix = 0;
  try {
    size_t used = 0;
    prefix = std::stoi(cidr.substr(slash + 1), &used);
    if (used != cidr.size() - slash - 1)
      return bad("bad prefix");
  } catch (const std::exception&) {
    return bad("bad prefix");
  }
  if (prefix < 16 || prefix > 29)
    return bad("prefix out of range");
  PodNetwork net;
  net.prefix = prefix;
  net.network = ntohl(addr.s_addr);
  if ((net.network & ~(~0u << (32 - prefix))) != 0)
    return bad("host bits set");
  return net;
}

std::string FormatIPv4(uint32_t address) {
  return fmt::format("{}.{}.{}.{}", address >> 24, (address >> 16) & 255, (address >> 8) & 255,
                     address & 255);
}

std::optional<uint32_t> IpAllocator::Allocate() {
  const uint32_t first = network_.Gateway() + 1;
  const uint32_t last = network_.Broadcast() - 1;
  for (uint32_t tries = 0; tries <= last - first; ++tries) {
    if (next_ < first || next_ > last)
      next_ = first;
    const uint32_t candidate = next_++;
    if (used_.insert(candidate).second)
      return candidate;
  }
  return std::nullopt;
}

Status CheckInterfaceName(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ || name.find('/') != std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("interface name \"{}\" is not valid: use 1 to {} characters without '/'", name,
                    IFNAMSIZ - 1));
  }
  return Status::Ok();
}

bool InterfaceExists(const std::string& name) {
  return if_nametoindex(name.c_str()) != 0;
}

Status EnsureBridge(const std::string& bridge, const PodNetwork& network) {
  if (Status s = CheckInterfaceName(bridge); !s.ok())
    return s;
  Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0)
    return Status::IoError(fmt::format("socket: {}", Errno(errno)));
  if (ioctl(sock.get(), SIOCBRADDBR, bridge.c_str()) != 0 && errno != EEXIST) {
    return Status::IoError(fmt::format("creating bridge {}: {}", bridge, Errno(errno)));
  }
  if (Status s = SetAddress(sock.get(), bridge, network.Gateway(), network.prefix); !s.ok()) {
    return s;
  }
  return SetUp(sock.get(), bridge, true);
}

Status DeleteBridge(const std::string& bridge) {
  if (!InterfaceExists(bridge))
    return Status::Ok();
  Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0)
    return Status::IoError(fmt::format("socket: {}", Errno(errno)));
  (void)SetUp(sock.get(), bridge, false);
  if (ioctl(sock.get(), SIOCBRDELBR, bridge.c_str()) != 0 && errno != ENXIO) {
    return Status::IoError(fmt::format("deleting bridge {}: {}", bridge, Errno(errno)));
  }
  return Status::Ok();
}

Status DeleteLink(const std::string& name) {
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0)
    return Status::Ok();
  Fd sock(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (sock.get() < 0)
    return Status::IoError(fmt::format("netlink socket: {}", Errno(errno)));
  alignas(nlmsghdr) char buf[256];
  std::memset(buf, 0, sizeof(buf));
  auto* msg = reinterpret_cast<nlmsghdr*>(buf);
  msg->nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  msg->nlmsg_type = RTM_DELLINK;
  msg->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  auto* info = static_cast<ifinfomsg*>(NLMSG_DATA(msg));
  info->ifi_family = AF_UNSPEC;
  info->ifi_index = static_cast<int>(index);
  Status s = Transact(sock.get(), msg, "deleting link " + name);
  if (!s.ok() && !InterfaceExists(name))
    return Status::Ok();  // gone meanwhile
  return s;
}

Status CreatePodVeth(int host_netlink, int host_ioctl, const std::string& host_name,
                     int pod_netns_fd, const std::string& bridge) {
  if (Status s = CheckInterfaceName(host_name); !s.ok())
    return s;
  alignas(nlmsghdr) char buf[1024];
  std::memset(buf, 0, sizeof(buf));
  auto* msg = reinterpret_cast<nlmsghdr*>(buf);
  msg->nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  msg->nlmsg_type = RTM_NEWLINK;
  msg->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  static_cast<ifinfomsg*>(NLMSG_DATA(msg))->ifi_family = AF_UNSPEC;
  AddAttr(msg, sizeof(buf), IFLA_IFNAME, host_name.c_str(), host_name.size() + 1);
  rtattr* linkinfo = AddAttr(msg, sizeof(buf), IFLA_LINKINFO, nullptr, 0);
  AddAttr(msg, sizeof(buf), IFLA_INFO_KIND, "veth", 5);
  rtattr* data = AddAttr(msg, sizeof(buf), IFLA_INFO_DATA, nullptr, 0);
  rtattr* peer = AddAttr(msg, sizeof(buf), VETH_INFO_PEER, nullptr, 0);
  ifinfomsg peer_info;
  std::memset(&peer_info, 0, sizeof(peer_info));
  peer_info.ifi_family = AF_UNSPEC;
  // The peer's ifinfomsg sits directly in the attribute, before its own attributes.
  msg->nlmsg_len += NLMSG_ALIGN(sizeof(peer_info));
  std::memcpy(RTA_DATA(peer), &peer_info, sizeof(peer_info));
  AddAttr(msg, sizeof(buf), IFLA_IFNAME, "eth0", 5);
  const uint32_t ns_fd = static_cast<uint32_t>(pod_netns_fd);
  rtattr* last = AddAttr(msg, sizeof(buf), IFLA_NET_NS_FD, &ns_fd, sizeof(ns_fd));
  if (last == nullptr)
    return Status::Internal("veth request does not fit its buffer");
  EndNest(msg, peer);
  EndNest(msg, data);
  EndNest(msg, linkinfo);
  if (Status s = Transact(host_netlink, msg, "creating veth " + host_name); !s.ok())
    return s;

  // The caller already lives in the pod's namespace: look the host side up through the
  // host socket, not if_nametoindex.
  ifreq q;
  FillIfreq(q, host_name);
  if (ioctl(host_ioctl, SIOCGIFINDEX, &q) != 0) {
    return Status::IoError(fmt::format("finding {}: {}", host_name, Errno(errno)));
  }
  ifreq ifr;
  FillIfreq(ifr, bridge);
  ifr.ifr_ifindex = q.ifr_ifindex;
  if (ioctl(host_ioctl, SIOCBRADDIF, &ifr) != 0) {
    return Status::IoError(
        fmt::format("adding {} to bridge {}: {}", host_name, bridge, Errno(errno)));
  }
  return SetUp(host_ioctl, host_name, true);
}

Status ConfigurePodInterface(uint32_t address, int prefix, uint32_t gateway) {
  Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0)
    return Status::IoError(fmt::format("socket: {}", Errno(errno)));
  if (Status s = SetUp(sock.get(), "lo", true); !s.ok())
    return s;
  if (Status s = SetAddress(sock.get(), "eth0", address, prefix); !s.ok())
    return s;
  if (Status s = SetUp(sock.get(), "eth0", true); !s.ok())
    return s;
  rtentry route;
  std::memset(&route, 0, sizeof(route));
  sockaddr_in dst = Sin(0), gw = Sin(gateway), mask = Sin(0);
  std::memcpy(&route.rt_dst, &dst, sizeof(dst));
  std::memcpy(&route.rt_gateway, &gw, sizeof(gw));
  std::memcpy(&route.rt_genmask, &mask, sizeof(mask));
  route.rt_flags = RTF_UP | RTF_GATEWAY;
  if (ioctl(sock.get(), SIOCADDRT, &route) != 0) {
    return Status::IoError(
        fmt::format("adding default route via {}: {}", FormatIPv4(gateway), Errno(errno)));
  }
  return Status::Ok();
}

}  // namespace kubesim
