#include "k8sbridge/jail/job_ns.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/jail/probe.h"
#include "k8sbridge/text.h"

namespace k8sbridge::jail {
namespace {

Status SysError(std::string_view what, int err) {
  return Status::IoError(fmt::format("{}: {}", what, std::strerror(err)));
}

// A socket's name, reached through a descriptor of its directory: sun_path
// holds only 108 bytes, and "/proc/self/fd/N/job<id>.sock" always fits, however
// long tmp_base is.
struct SocketName {
  UniqueFd dir;
  sockaddr_un addr{};
  socklen_t len = 0;
};

Result<SocketName> NameSocket(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size())
    return Status::InvalidArgument(fmt::format("{} is not a socket path", path));
  SocketName name;
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  name.dir = UniqueFd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!name.dir.valid()) {
    int err = errno;
    if (err == ENOENT)
      return Status::Unavailable(fmt::format("{} does not exist", dir));
    return SysError(fmt::format("open {}", dir), err);
  }
  std::string proc = fmt::format("{}/{}", name.dir.ProcPath(), path.substr(slash + 1));
  if (proc.size() >= sizeof name.addr.sun_path)
    return Status::InvalidArgument(fmt::format("socket name {} is too long", path));
  name.addr.sun_family = AF_UNIX;
  std::memcpy(name.addr.sun_path, proc.c_str(), proc.size() + 1);
  name.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + proc.size() + 1);
  return name;
}

// Closes every descriptor from 3 up except those in `keep`.
void CloseAllBut(std::initializer_list<int> keep) {
  std::vector<int> fds(keep);
  std::sort(fds.begin(), fds.end());
  unsigned next = 3;
  for (int fd : fds) {
    if (fd < static_cast<int>(next))
      continue;
    if (static_cast<unsigned>(fd) > next)
      ::close_range(next, static_cast<unsigned>(fd) - 1, 0);
    next = static_cast<unsigned>(fd) + 1;
  }
  ::close_range(next, ~0U, 0);
}

// Holder pid and start time, as the state file holds them.
struct HolderId {
  pid_t pid = 0;
  uint64_t start = 0;
};

// Field 22 of /proc/PID/stat, in clock ticks since boot: with the pid it names
// one process for the life of the machine. 0 when the process is gone.
uint64_t StartTime(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return 0;
  char buf[1024];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  std::string_view text(buf, static_cast<size_t>(n));
  // The command name (field 2) may hold spaces and parentheses: count fields
  // from the last ')'.
  size_t pos = text.rfind(')');
  if (pos == std::string_view::npos)
    return 0;
  std::string_view rest = text.substr(pos + 1);
  for (int field = 3; field <= 22; ++field) {
    size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos)
      return 0;
    rest.remove_prefix(start);
    size_t end = rest.find(' ');
    if (field == 22) {
      auto start_time = k8sbridge::text::ParseInt<uint64_t>(rest.substr(0, end));
      return start_time.ok() ? *start_time : 0;
    }
    if (end == std::string_view::npos)
      return 0;
    rest.remove_prefix(end);
  }
  return 0;
}

// The fast path: the holder's namespace without a round trip, when the state
// file names a live holder whose last probe (the file's mtime) succeeded
// within kFresh. Anything else (no file, stale, a garbled or reused pid) is
// "not known to be fresh": the caller asks the holder instead.
// A state file or socket that is not this (root) process's own was planted
// by someone else to hand the job's tasks a namespace of their choosing.
Status CheckOwnFile(const struct stat& st, mode_t type, const std::string& path) {
  if ((st.st_mode & S_IFMT) != type || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (type == S_IFREG && st.st_nlink != 1)) {
    return Status::PermissionDenied(fmt::format(
        "job namespace file {} is not the one spank_jail made (uid {}, mode {:06o}): refusing it "
        "(was it planted? check who can write to its directory)",
        path, st.st_uid, st.st_mode));
  }
  return Status::Ok();
}

Result<UniqueFd> FreshNamespace(const std::string& state_path) {
  UniqueFd fd(::open(state_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid())
    return UniqueFd();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return UniqueFd();
  if (Status s = CheckOwnFile(st, S_IFREG, state_path); !s.ok())
    return s;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  auto age = std::chrono::seconds(now.tv_sec - st.st_mtim.tv_sec) +
             std::chrono::nanoseconds(now.tv_nsec - st.st_mtim.tv_nsec);
  if (age < std::chrono::nanoseconds(0) || age > kFresh)
    return UniqueFd();  // a clock that went back proves nothing either
  char buf[64];
  ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
  if (n <= 0)
    return UniqueFd();
  HolderId id;
  const char* end = buf + n;
  auto r1 = std::from_chars(buf, end, id.pid);
  if (r1.ec != std::errc() || r1.ptr == end || *r1.ptr != ' ')
    return UniqueFd();
  auto r2 = std::from_chars(r1.ptr + 1, end, id.start);
  if (r2.ec != std::errc() || id.pid <= 0 || id.start == 0)
    return UniqueFd();
  char ns_path[64];
  std::snprintf(ns_path, sizeof ns_path, "/proc/%d/ns/mnt", static_cast<int>(id.pid));
  UniqueFd ns(::open(ns_path, O_RDONLY | O_CLOEXEC));
  // Checked after the open: the descriptor pins whichever namespace the pid
  // had, and a matching start time says it was the holder's.
  if (!ns.valid() || StartTime(id.pid) != id.start)
    return UniqueFd();
  return ns;
}

// The holder's socket is served by the extern step's root process; one
// planted by anyone else would answer with a namespace of their choosing.
Status CheckPeerIsOurs(int sock, const std::string& socket_path) {
  struct ucred peer {};
  socklen_t peer_len = sizeof peer;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0 ||
      peer.uid != ::geteuid()) {
    return Status::PermissionDenied(fmt::format(
        "the job namespace socket {} is served by uid {}, not by spank_jail's holder: refusing it",
        socket_path, peer.uid));
  }
  return Status::Ok();
}

// One answer: the probe's report and, when the jail answered, the namespace.
void Answer(int conn, ProbeReport report, int ns_fd) {
  iovec iov{&report, sizeof report};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (report.stage == 0 && ns_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &ns_fd, sizeof(int));
  }
  (void)::sendmsg(conn, &msg, MSG_NOSIGNAL);  // a step that gave up has closed its end
}

// The holder: a forked copy of slurmstepd that turns into the job's namespace.
// glibc's fork leaves malloc usable in the child; Slurm's logger is not (its
// lock may have been held by another thread), so the holder only reports
// through `report_fd`: "0" when inside, or "1" and the error message, ending
// with '\0'. It then answers the job's steps on `listen_fd` until it is killed.
[[noreturn]] void HolderMain(const TaskPlan& plan, const std::string& probe_rel, int report_fd,
                             int listen_fd, int beat_fd, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    ::_exit(1);  // the extern step ended before the holder got this far
  ::prctl(PR_SET_NAME, "spank_jail_ns");
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig)
    ::signal(sig, SIG_DFL);  // fails harmlessly for SIGKILL, SIGSTOP and glibc's own
  // Keep none of slurmstepd's descriptors: its sockets and pipes must close
  // when the step's own copies do, not when the job ends.
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
  }
  CloseAllBut({report_fd, listen_fd, beat_fd});

  // The state file names the holder; its mtime says "the last probe
  // succeeded", so it starts out at the epoch, not fresh.
  std::string id = fmt::format("{} {}\n", ::getpid(), StartTime(::getpid()));
  struct timespec epoch[2] = {{0, 0}, {0, 0}};
  Status s;
  if (::pwrite(beat_fd, id.data(), id.size(), 0) != static_cast<ssize_t>(id.size()) ||
      ::futimens(beat_fd, epoch) != 0) {
    s = SysError("write the job namespace state file", errno);
  }
  if (s.ok())
    s = EnterJail(plan);
  int ns_fd = -1;
  if (s.ok()) {
    ns_fd = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0)
      s = SysError("open the job namespace", errno);
  }
  // Probes now, every kBeat, and for every step that asks; each success
  // touches the state file, which is what the fast path reads.
  const std::string probe_path = "/" + probe_rel;
  auto probe = [&] {
    ProbeReport r = ProbeFiles("/", probe_path.c_str());
    if (r.stage == 0)
      ::futimens(beat_fd, nullptr);
    return r;
  };
  if (s.ok())
    probe();  // a failure here is the steps' to report, with the prober's message

  std::string report = s.ok() ? "0" : "1" + s.message();
  ssize_t ignored = ::write(report_fd, report.c_str(), report.size() + 1);  // with its '\0'
  (void)ignored;
  ::close(report_fd);
  if (!s.ok())
    ::_exit(1);

  const int beat_ms = static_cast<int>(kBeat.count());
  for (;;) {
    struct pollfd p {
      listen_fd, POLLIN, 0
    };
    if (::poll(&p, 1, beat_ms) <= 0) {
      probe();
      continue;
    }
    int conn = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
        struct timespec pause {
          0, 10'000'000
        };  // out of descriptors or memory: do not spin
        ::nanosleep(&pause, nullptr);
      }
      continue;
    }
    Answer(conn, probe(), ns_fd);
    ::close(conn);
  }
}

}  // namespace

JobNamespacePaths JobNamespacePathsFor(const std::string& tmp_base, const std::string& node,
                                       uint32_t job_id) {
  return {fmt::format("{}/{}/job{}.sock", tmp_base, node, job_id),
          fmt::format("{}/{}/job{}.ns", tmp_base, node, job_id)};
}

namespace {

// What the holder inherits: the socket it answers on and the state file it
// writes through its descriptor.
struct HolderEndpoints {
  UniqueFd listener;
  UniqueFd state;
};

Result<HolderEndpoints> CreateHolderEndpoints(const SocketName& name,
                                              const JobNamespacePaths& paths) {
  auto remove = [&] { (void)RemoveJobNamespace(paths); };
  HolderEndpoints out;
  out.listener = UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!out.listener.valid())
    return SysError("socket", errno);
  if (::bind(out.listener.get(), reinterpret_cast<const sockaddr*>(&name.addr), name.len) != 0)
    return SysError(fmt::format("bind {}", paths.socket), errno);
  if (::listen(out.listener.get(), SOMAXCONN) != 0) {
    int err = errno;
    remove();
    return SysError(fmt::format("listen on {}", paths.socket), err);
  }
  // Created here, in the host's view; the holder writes it through the
  // descriptor it inherits.
  out.state = UniqueFd(
      ::open(paths.state.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.state.valid()) {
    int err = errno;
    remove();
    return SysError(fmt::format("create {}", paths.state), err);
  }
  return out;
}

// Waits until the holder's end `fd` is readable: false once `deadline` has passed.
Result<bool> AwaitReadable(int fd, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    struct pollfd p {
      fd, POLLIN, 0
    };
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR)
      return SysError("poll the job namespace holder", errno);
    if (n > 0)
      return true;
  }
}

// The holder's report up to its '\0' (empty when it exited without one).
// Setting up touches the jail, which may hang: waits only until the deadline.
Result<std::string> AwaitHolderReport(int report_fd, const std::string& jail,
                                      std::chrono::milliseconds timeout) {
  std::string report;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto readable = AwaitReadable(report_fd, deadline);
    if (!readable.ok())
      return readable.status();
    if (!*readable) {
      return Status::Timeout(fmt::format(
          "the job namespace holder did not enter jail {} within {} ms", jail, timeout.count()));
    }
    char buf[1024];
    ssize_t got = ::read(report_fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    report.append(buf, static_cast<size_t>(got));
    // Ends at the '\0', not at EOF: a copy of the pipe that another thread's
    // fork took along may keep the write end open.
    if (size_t end = report.find('\0'); end != std::string::npos) {
      report.resize(end);
      break;
    }
  }
  return report;
}

}  // namespace

Status StartJobNamespace(const TaskPlan& plan, const std::string& probe_rel,
                         const JobNamespacePaths& paths, std::chrono::milliseconds timeout) {
  auto name = NameSocket(paths.socket);
  if (!name.ok())
    return name.status();
  (void)RemoveJobNamespace(paths);  // left by an earlier job with this id
  auto remove = [&] { (void)RemoveJobNamespace(paths); };
  auto endpoints = CreateHolderEndpoints(*name, paths);
  if (!endpoints.ok())
    return endpoints.status();
  UniqueFd listener = std::move(endpoints->listener);
  UniqueFd state = std::move(endpoints->state);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    int err = errno;
    remove();
    return SysError("pipe2", err);
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    remove();
    return SysError("fork the job namespace holder", err);
  }
  if (pid == 0) {
    ::close(fds[0]);
    HolderMain(plan, probe_rel, fds[1], listener.get(), state.get(), parent);
  }
  ::close(fds[1]);
  listener = UniqueFd();
  UniqueFd report_fd(fds[0]);

  auto fail = [&](Status why) {
    ::kill(pid, SIGKILL);
    // Reaped when it can be; one stuck in a hung jail stays a zombie of the
    // extern step until that ends, which does not wait for it.
    ::waitpid(pid, nullptr, WNOHANG);
    remove();
    return why;
  };
  auto report = AwaitHolderReport(report_fd.get(), plan.jail, timeout);
  if (!report.ok())
    return fail(report.status());
  if (report->empty())
    return fail(Status::Internal("the job namespace holder exited without a report"));
  if (*report != "0")
    return fail(Status::IoError(report->substr(1)));
  return Status::Ok();
}

Result<UniqueFd> OpenJobNamespace(const JobNamespacePaths& paths, const std::string& jail,
                                  const std::string& probe_rel, std::chrono::milliseconds timeout) {
  auto fresh = FreshNamespace(paths.state);
  if (!fresh.ok() || fresh->valid())
    return fresh;
  const std::string& socket_path = paths.socket;
  auto name = NameSocket(socket_path);
  if (!name.ok())
    return Status::Unavailable(name.status().message());
  struct stat st {};
  std::string base = socket_path.substr(socket_path.rfind('/') + 1);
  if (::fstatat(name->dir.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::Unavailable(
        fmt::format("no job namespace holder at {}: {}", socket_path, std::strerror(errno)));
  }
  if (Status s = CheckOwnFile(st, S_IFSOCK, socket_path); !s.ok())
    return s;
  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid())
    return SysError("socket", errno);
  if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&name->addr), name->len) != 0) {
    int err = errno;
    if (err == EAGAIN) {
      // Its backlog is full: the holder has been stuck for many steps.
      return Status::Timeout(fmt::format(
          "jail {} did not answer within {} ms (is its file server hung?)", jail, timeout.count()));
    }
    return Status::Unavailable(
        fmt::format("no job namespace holder at {}: {}", socket_path, std::strerror(err)));
  }
  if (Status s = CheckPeerIsOurs(sock.get(), socket_path); !s.ok())
    return s;
  auto readable = AwaitReadable(sock.get(), std::chrono::steady_clock::now() + timeout);
  if (!readable.ok())
    return readable.status();
  if (!*readable) {
    return Status::Timeout(fmt::format(
        "jail {} did not answer within {} ms (is its file server hung?)", jail, timeout.count()));
  }
  ProbeReport report{};
  iovec iov{&report, sizeof report};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = ::recvmsg(sock.get(), &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  UniqueFd ns;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      ns = UniqueFd(fd);
    }
  }
  if (got != static_cast<ssize_t>(sizeof report)) {
    // The holder died between accepting and answering (its job is ending).
    return Status::Unavailable(
        fmt::format("the job namespace holder at {} closed without answering", socket_path));
  }
  if (report.stage != 0)
    return ProbeResult(jail, jail + "/" + probe_rel, report);
  if (!ns.valid())
    return Status::Internal("the job namespace holder answered without its namespace");
  return ns;
}

Status JoinJobNamespace(int ns_fd) {
  if (::setns(ns_fd, CLONE_NEWNS) != 0)
    return SysError("setns into the job's mount namespace", errno);
  if (::chdir("/") != 0)
    return SysError("chdir / in the jail", errno);
  return Status::Ok();
}

Status RemoveJobNamespace(const JobNamespacePaths& paths) {
  for (const std::string* path : {&paths.socket, &paths.state}) {
    if (::unlink(path->c_str()) != 0 && errno != ENOENT)
      return SysError(fmt::format("remove {}", *path), errno);
  }
  return Status::Ok();
}

}  // namespace k8sbridge::jail
