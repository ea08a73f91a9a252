#include "k8sbridge/jail/probe.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace k8sbridge::jail {
namespace {

// Runs in a clone of a possibly multi-threaded process: only async-signal-safe
// calls, no allocation.
void ProbeAndReport(const char* jail, const char* probe_path, int fd) {
  ProbeReport r = ProbeFiles(jail, probe_path);
  ssize_t ignored = ::write(fd, &r, sizeof r);
  (void)ignored;
}

struct ProbeArgs {
  const char* jail;
  const char* probe_path;
  int fd;
};

int ProbeMain(void* arg) {
  auto* a = static_cast<ProbeArgs*>(arg);
  ProbeAndReport(a->jail, a->probe_path, a->fd);
  return 0;
}

constexpr size_t kProbeStack = 64 * 1024;

// What a prober uses: its stack and its arguments. Freed only once the prober
// has been reaped, since it shares our memory.
struct Prober {
  pid_t pid = -1;
  void* stack = nullptr;
  std::string jail;
  std::string probe_path;
  ProbeArgs args{};
};

// Probers we stopped waiting for (hung, or slow to exit), kept reachable and
// reaped by later probes.
std::mutex abandoned_mu;
std::vector<Prober*>* abandoned = new std::vector<Prober*>();

void Free(Prober* p) {
  if (p->stack != nullptr)
    ::munmap(p->stack, kProbeStack);
  delete p;
}

bool Reap(Prober* p) {
  int wstatus = 0;
  return ::waitpid(p->pid, &wstatus, __WALL | WNOHANG) == p->pid;
}

// Creates the prober on the CPU this thread runs on: our own affinity is narrowed
// to that CPU around clone(), so the child (which inherits it) is queued there
// and runs as soon as we block waiting for its answer. Left to the fork
// balancer, it is often queued behind another CPU's running task, and on a busy
// node (a job's tasks on every core) the step waited milliseconds for a probe
// that takes tens of microseconds. Our own affinity is restored before
// returning (should our cpuset have shrunk meanwhile, to every CPU it allows, never
// to the one CPU); if narrowing fails, the prober is created anyway.
pid_t CloneOnThisCpu(int (*fn)(void*), void* stack_top, void* arg) {
  cpu_set_t saved;
  bool narrowed = false;
  const int cpu = ::sched_getcpu();
  if (cpu >= 0 && cpu < CPU_SETSIZE && ::sched_getaffinity(0, sizeof saved, &saved) == 0) {
    cpu_set_t here;
    CPU_ZERO(&here);
    CPU_SET(cpu, &here);
    narrowed = ::sched_setaffinity(0, sizeof here, &here) == 0;
  }
  pid_t pid = ::clone(fn, stack_top, CLONE_VM, arg);
  int clone_errno = errno;
  if (narrowed && ::sched_setaffinity(0, sizeof saved, &saved) != 0) {
    cpu_set_t every;
    std::memset(&every, 0xff, sizeof every);
    (void)::sched_setaffinity(0, sizeof every, &every);
  }
  errno = clone_errno;
  return pid;
}

void ReapAbandoned() {
  std::lock_guard lock(abandoned_mu);
  std::erase_if(*abandoned, [](Prober* p) {
    if (!Reap(p))
      return false;
    Free(p);
    return true;
  });
}

}  // namespace

ProbeReport ProbeFiles(const char* jail, const char* probe_path) {
  ProbeReport r{0, 0};
  struct stat st;
  if (::stat(jail, &st) != 0)
    return {1, errno};
  int pfd = ::open(probe_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (pfd < 0)
    return {2, errno};
  char c;
  if (::read(pfd, &c, 1) < 0)
    r = {3, errno};
  ::close(pfd);
  return r;
}

Status ProbeResult(const std::string& jail, const std::string& probe_path, ProbeReport report) {
  switch (report.stage) {
    case 0:
      return Status::Ok();
    case 1:
      return Status::NotFound(fmt::format("jail {} is missing: {}: is the jail volume mounted?",
                                          jail, std::strerror(report.err)));
    default:
      return Status::NotFound(fmt::format(
          "jail {} looks unmounted or empty: {}: {}: mount the jail volume, or set probe= to a "
          "file every jail has",
          jail, probe_path, std::strerror(report.err)));
  }
}

namespace {

// Clones the prober that writes its ProbeReport to fds[1]. On failure frees
// what it made and closes both ends of the pipe.
Result<Prober*> StartProber(const std::string& jail, const std::string& probe_path,
                            const int fds[2]) {
  auto* prober = new Prober();
  prober->jail = jail;
  prober->probe_path = probe_path;
  prober->args = ProbeArgs{prober->jail.c_str(), prober->probe_path.c_str(), fds[1]};
  prober->stack = ::mmap(nullptr, kProbeStack, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (prober->stack == MAP_FAILED) {
    int err = errno;
    prober->stack = nullptr;
    Free(prober);
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IoError(fmt::format("jail probe: mmap: {}", std::strerror(err)));
  }
  prober->pid =
      CloneOnThisCpu(ProbeMain, static_cast<char*>(prober->stack) + kProbeStack, &prober->args);
  if (prober->pid < 0) {
    int err = errno;
    Free(prober);
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IoError(fmt::format("jail probe: clone: {}", std::strerror(err)));
  }
  return prober;
}

struct ProbeAnswer {
  Status result;
  bool decided = false;  // the prober answered: it is about to exit, worth reaping
};

ProbeAnswer AwaitProbeAnswer(int read_fd, const std::string& jail, const std::string& probe_path,
                             std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ProbeReport report{};
  size_t got = 0;
  ProbeAnswer answer;
  while (!answer.decided) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      answer.result = Status::Timeout(fmt::format(
          "jail {} did not answer within {} ms (is its file server hung?)", jail, timeout.count()));
      break;
    }
    struct pollfd p {
      read_fd, POLLIN, 0
    };
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      answer.result = Status::IoError(fmt::format("jail probe: poll: {}", std::strerror(errno)));
      break;
    }
    if (n == 0)
      continue;  // the deadline check above ends the loop
    ssize_t r = ::read(read_fd, reinterpret_cast<char*>(&report) + got, sizeof report - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      answer.result = Status::Internal(
          fmt::format("jail probe of {} ended without an answer (could not fork?)", jail));
      break;
    }
    got += static_cast<size_t>(r);
    if (got < sizeof report)
      continue;
    answer.decided = true;
    answer.result = ProbeResult(jail, probe_path, report);
  }
  return answer;
}

// Frees the prober once it has exited; one that is hung (or not yet gone) is
// kept for a later probe to reap.
void ReleaseProber(Prober* prober, bool decided) {
  bool reaped = false;
  if (decided) {
    auto reap_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (!(reaped = Reap(prober)) && std::chrono::steady_clock::now() < reap_deadline) {
      ::sched_yield();
    }
  }
  if (reaped) {
    Free(prober);
  } else {
    std::lock_guard lock(abandoned_mu);
    abandoned->push_back(prober);
  }
}

}  // namespace

Status ProbeJail(const std::string& jail, const std::string& probe_rel,
                 std::chrono::milliseconds timeout) {
  const std::string probe_path = jail + "/" + probe_rel;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::IoError(fmt::format("jail probe: pipe: {}", std::strerror(errno)));
  }
  // The prober shares our memory (CLONE_VM: no page tables to copy, a single
  // scheduling hop) but is a process of its own, not one of our threads: if it
  // hangs in the kernel on a dead file server, we stop waiting for it and it can
  // never hold up slurmstepd's exit. Its exit signal is 0, so slurmstepd's own
  // wait for its tasks never sees it.
  ReapAbandoned();
  auto prober = StartProber(jail, probe_path, fds);
  if (!prober.ok())
    return prober.status();
  ::close(fds[1]);
  ProbeAnswer answer = AwaitProbeAnswer(fds[0], jail, probe_path, timeout);
  ::close(fds[0]);
  ReleaseProber(*prober, answer.decided);
  return answer.result;
}

}  // namespace k8sbridge::jail
