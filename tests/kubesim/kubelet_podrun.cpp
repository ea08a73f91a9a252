// kubesim-podrun: becomes one pod's container. The kubesim kubelet starts it with the
// pod's environment; it puts itself into new network, UTS and mount namespaces, wires
// eth0 to the stand-in's bridge, sets the hostname, bind-mounts the volumes and then
// execs the container's command from the host's filesystem.
//
// It is a separate single-threaded program (not a fork of the multi-threaded kubesim)
// so that everything between fork and exec is safe. It never remounts /sys or /proc:
// /sys/fs/cgroup stays the host's, as slurmd inside these pods needs.
//
// Failures before the exec are written to --status-fd as one line
// "<reason>\t<message>" and the program exits 128; a successful exec closes the
// descriptor (close-on-exec) without writing, which is how the kubelet knows the
// container started.
//
// Usage (all options before "--"):
//   kubesim-podrun --status-fd N --hostname H [--bridge B --veth V --address A/P
//                  --gateway G] [--bind SRC DST ro|rw]... [--workdir D] -- CMD ARGS...
//   kubesim-podrun --sandbox --status-fd N --hostname H [--bridge ...]
// --sandbox (the kubelet's OCI mode): also a new IPC namespace; instead of a command
// the process then only holds the namespaces, as a pod's pause container does, until
// SIGTERM or SIGKILL; the pod's runc containers join them.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kubelet_net.h"

namespace {

int status_fd = -1;

[[noreturn]] void Fail(const std::string& reason, const std::string& message) {
  const std::string line = reason + "\t" + message + "\n";
  if (status_fd >= 0) {
    (void)!write(status_fd, line.data(), line.size());
  } else {
    std::fputs(line.c_str(), stderr);
  }
  _exit(128);
}

struct Bind {
  std::string source, target;
  bool read_only = false;
};

struct Args {
  std::string hostname, bridge, veth, address, gateway, workdir;
  std::vector<Bind> binds;
  std::vector<std::string> command;
  bool sandbox = false;
};

Args Parse(int argc, char** argv) {
  Args a;
  int i = 1;
  auto value = [&](const char* opt) -> std::string {
    if (i + 1 >= argc)
      Fail("StartError", fmt::format("kubesim-podrun: {} needs a value", opt));
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "--") {
      ++i;
      break;
    }
    if (opt == "--status-fd") {
      status_fd = std::atoi(value("--status-fd").c_str());
    } else if (opt == "--hostname") {
      a.hostname = value("--hostname");
    } else if (opt == "--bridge") {
      a.bridge = value("--bridge");
    } else if (opt == "--veth") {
      a.veth = value("--veth");
    } else if (opt == "--address") {
      a.address = value("--address");
    } else if (opt == "--gateway") {
      a.gateway = value("--gateway");
    } else if (opt == "--sandbox") {
      a.sandbox = true;
    } else if (opt == "--workdir") {
      a.workdir = value("--workdir");
    } else if (opt == "--bind") {
      Bind b;
      b.source = value("--bind");
      b.target = value("--bind");
      b.read_only = value("--bind") == "ro";
      a.binds.push_back(b);
    } else {
      Fail("StartError", fmt::format("kubesim-podrun: unknown option {}", opt));
    }
  }
  for (; i < argc; ++i)
    a.command.emplace_back(argv[i]);
  if (a.command.empty() && !a.sandbox)
    Fail("StartError", "kubesim-podrun: no command after --");
  return a;
}

uint32_t ParseIPv4(const std::string& text) {
  in_addr addr;
  if (inet_pton(AF_INET, text.c_str(), &addr) != 1) {
    Fail("StartError", fmt::format("kubesim-podrun: bad IPv4 address {}", text));
  }
  return ntohl(addr.s_addr);
}

void MakeMountPoint(const std::string& path, bool directory) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0)
    return;
  // Create the parents, then the mount point itself: a directory, or an empty file when
  // the source is a file.
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    (void)mkdir(path.substr(0, pos).c_str(), 0755);
  }
  if (directory) {
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      Fail("CreateContainerError",
           fmt::format("creating mount point {}: {}", path, std::strerror(errno)));
    }
  } else {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      Fail("CreateContainerError",
           fmt::format("creating mount point {}: {}", path, std::strerror(errno)));
    }
    close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args = Parse(argc, argv);
  // The successful exec must close the status descriptor: that EOF means "started".
  if (status_fd >= 0)
    (void)fcntl(status_fd, F_SETFD, FD_CLOEXEC);

  // Own process group and session: the kubelet signals the whole group on delete.
  (void)setsid();
  // Die with the kubelet's thread that started us rather than outlive a crashed kubesim.
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);

  const bool with_network = !args.bridge.empty();
  int host_netlink = -1, host_ioctl = -1;
  if (with_network) {
    // Sockets opened now stay in the host's network namespace after unshare.
    host_netlink = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    host_ioctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (host_netlink < 0 || host_ioctl < 0) {
      Fail("StartError", fmt::format("opening host sockets: {}", std::strerror(errno)));
    }
  }
  const int namespaces =
      CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS | (args.sandbox ? CLONE_NEWIPC : 0);
  if (unshare(namespaces) != 0) {
    Fail("StartError", fmt::format("unshare(net, uts, mnt): {}", std::strerror(errno)));
  }

  if (with_network) {
    const size_t slash = args.address.find('/');
    if (slash == std::string::npos)
      Fail("StartError", "--address needs ADDRESS/PREFIX");
    const uint32_t address = ParseIPv4(args.address.substr(0, slash));
    const int prefix = std::atoi(args.address.c_str() + slash + 1);
    const uint32_t gateway = ParseIPv4(args.gateway);
    const int pod_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (pod_ns < 0)
      Fail("StartError", fmt::format("opening own netns: {}", std::strerror(errno)));
    kubesim::Status s =
        kubesim::CreatePodVeth(host_netlink, host_ioctl, args.veth, pod_ns, args.bridge);
    if (!s.ok())
      Fail("StartError", s.message());
    s = kubesim::ConfigurePodInterface(address, prefix, gateway);
    if (!s.ok())
      Fail("StartError", s.message());
    close(pod_ns);
    close(host_netlink);
    close(host_ioctl);
  }

  if (!args.hostname.empty() && sethostname(args.hostname.data(), args.hostname.size()) != 0) {
    Fail("StartError", fmt::format("sethostname {}: {}", args.hostname, std::strerror(errno)));
  }

  if (args.sandbox) {
    // Started: the kubelet reads EOF on the status descriptor.
    close(status_fd);
    for (int sig = 1; sig < NSIG; ++sig)
      std::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (;;)
      pause();
  }

  // Mounts made below stay in this namespace; the host's later mounts still reach us.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    Fail("StartError", fmt::format("making / rslave: {}", std::strerror(errno)));
  }
  for (const Bind& b : args.binds) {
    struct stat st;
    if (stat(b.source.c_str(), &st) != 0) {
      Fail("CreateContainerConfigError",
           fmt::format("volume source {}: {}", b.source, std::strerror(errno)));
    }
    MakeMountPoint(b.target, S_ISDIR(st.st_mode));
    if (mount(b.source.c_str(), b.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      Fail("CreateContainerError",
           fmt::format("bind-mounting {} at {}: {}", b.source, b.target, std::strerror(errno)));
    }
    if (b.read_only &&
        mount(nullptr, b.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      Fail("CreateContainerError",
           fmt::format("making {} read-only: {}", b.target, std::strerror(errno)));
    }
  }

  if (!args.workdir.empty() && chdir(args.workdir.c_str()) != 0) {
    Fail("CreateContainerError",
         fmt::format("working directory {}: {}", args.workdir, std::strerror(errno)));
  }

  std::vector<char*> argv_exec;
  for (std::string& a : args.command)
    argv_exec.push_back(a.data());
  argv_exec.push_back(nullptr);
  // Restore the default signal dispositions a container starts with.
  for (int sig = 1; sig < NSIG; ++sig)
    std::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvp(argv_exec[0], argv_exec.data());
  const int err = errno;
  if (err == ENOENT) {
    Fail("StartError",
         fmt::format("exec: \"{}\": executable file not found in $PATH", args.command[0]));
  }
  Fail("StartError", fmt::format("exec: \"{}\": {}", args.command[0], std::strerror(err)));
}
