#include "k8sbridge/supervise.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace k8sbridge {
namespace {

// The main loop wakes this often with nothing to do, to reap what a lost SIGCHLD
// would leave (none is lost, pending signals merge; this is a belt to the braces).
constexpr std::chrono::milliseconds kIdleWake{60'000};
// While companions stop: how often to look again at one that is not our child.
constexpr std::chrono::milliseconds kCompanionPoll{100};
// How often a companion that has not stopped gets SIGTERM again.
constexpr std::chrono::milliseconds kCompanionTermAgain{500};

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

// Reaps every ended child; the wait status of `pid` when it was one of them.
std::optional<int> ReapAll(InitSystem& system, int pid, Logger& log) {
  std::optional<int> main_status;
  while (auto reaped = system.ReapOne()) {
    if (reaped->pid == pid) {
      main_status = reaped->wait_status;
    } else {
      log.Debug("reaped pid {} ({})", reaped->pid, DescribeWaitStatus(reaped->wait_status));
    }
  }
  return main_status;
}

}  // namespace

const std::vector<int>& ForwardedSignals() {
  static const std::vector<int> kSignals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return kSignals;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status))
    return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status))
    return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return fmt::format("was killed by {}", SignalName(WTERMSIG(wait_status)));
  return fmt::format("ended with wait status {:#x}", wait_status);
}

void StopCompanions(const std::vector<Companion>& companions, std::chrono::milliseconds grace,
                    InitSystem& system, Logger& log) {
  std::vector<Companion> left;
  for (const auto& c : companions) {
    if (c.pid <= 1 || !system.Alive(c.pid))
      continue;
    log.Info("stopping {} (pid {})", c.name, c.pid);
    left.push_back(c);
  }
  Clock& clock = system.clock();
  const auto deadline = clock.Now() + grace;
  auto next_term = clock.Now();
  while (!left.empty()) {
    while (auto reaped = system.ReapOne())
      std::erase_if(left, [&](const Companion& c) { return c.pid == reaped->pid; });
    std::erase_if(left, [&](const Companion& c) { return !system.Alive(c.pid); });
    const auto now = clock.Now();
    if (left.empty())
      break;
    if (now >= deadline) {
      for (const auto& c : left) {
        log.Warning("{} (pid {}) is still running {} ms after SIGTERM: sending SIGKILL", c.name,
                    c.pid, grace.count());
        system.Signal(c.pid, SIGKILL);
      }
      break;
    }
    // Again and again: munged's handler only sets a flag that its main loop reads
    // between accept() calls, so a SIGTERM that lands just before accept() blocks
    // is seen only at the next one (munge's src/munged/job.c).
    if (now >= next_term) {
      for (const auto& c : left)
        system.Signal(c.pid, SIGTERM);
      next_term = now + kCompanionTermAgain;
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::min(deadline, next_term) - now);
    (void)system.NextSignal(std::min(wait, kCompanionPoll));
  }
}

Result<int> Supervise(const SuperviseRequest& request, InitSystem& system, Logger& log) {
  auto pid = system.Spawn(request.argv);
  if (!pid.ok()) {
    StopCompanions(request.companions, request.companion_grace, system, log);
    return pid.status().WithContext(fmt::format("starting {}", request.name));
  }
  log.Info("{} runs as pid {}: passing signals on to it, reaping orphans", request.name, *pid);
  std::optional<int> status;
  while (!status) {
    const std::optional<int> signal = system.NextSignal(kIdleWake);
    if (signal && *signal != SIGCHLD) {
      log.Info("passing {} on to {} (pid {})", SignalName(*signal), request.name, *pid);
      system.Signal(*pid, *signal);
      continue;
    }
    status = ReapAll(system, *pid, log);
  }
  const int code = ExitCodeOf(*status);
  log.Info("{} {}: exit code {}", request.name, DescribeWaitStatus(*status), code);
  StopCompanions(request.companions, request.companion_grace, system, log);
  return code;
}

struct RealInitSystem::SavedMask {
  sigset_t waited;
  sigset_t before;
};

RealInitSystem::RealInitSystem() : saved_(std::make_unique<SavedMask>()) {
  sigemptyset(&saved_->waited);
  sigaddset(&saved_->waited, SIGCHLD);
  for (int s : ForwardedSignals())
    sigaddset(&saved_->waited, s);
  sigprocmask(SIG_BLOCK, &saved_->waited, &saved_->before);
}

RealInitSystem::~RealInitSystem() {
  sigprocmask(SIG_SETMASK, &saved_->before, nullptr);
}

Result<int> RealInitSystem::Spawn(const std::vector<std::string>& argv) {
  return SpawnProcess(argv);
}

std::optional<int> RealInitSystem::NextSignal(std::chrono::milliseconds timeout) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout - seconds);
  timespec ts{};
  ts.tv_sec = seconds.count();
  ts.tv_nsec = nanos.count();
  siginfo_t info{};
  const int signal = sigtimedwait(&saved_->waited, &info, &ts);
  if (signal < 0)
    return std::nullopt;  // EAGAIN: the timeout; EINTR: a signal we do not wait for
  return signal;
}

std::optional<Reaped> RealInitSystem::ReapOne() {
  int status = 0;
  const pid_t pid = waitpid(-1, &status, WNOHANG);
  if (pid <= 0)
    return std::nullopt;  // 0: children left, none ended; -1/ECHILD: no children
  Reaped r;
  r.pid = pid;
  r.wait_status = status;
  return r;
}

void RealInitSystem::Signal(int pid, int signal) {
  (void)kill(pid, signal);
}

bool RealInitSystem::Alive(int pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

Result<int> SpawnProcess(const std::vector<std::string>& argv, int stdout_fd, int stderr_fd) {
  if (argv.empty())
    return Status::InvalidArgument("no command to run");
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0)
    return Status::IoError(fmt::format("fork for {}: {}", argv[0], std::strerror(errno)));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0)
      _exit(127);
    if (stderr_fd >= 0 && dup2(stderr_fd, STDERR_FILENO) < 0)
      _exit(127);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return static_cast<int>(pid);
}

bool TakeOnInitDuties(bool forced, Logger& log) {
  if (getpid() == 1)
    return true;
  if (!forced)
    return false;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    log.Warning("prctl(PR_SET_CHILD_SUBREAPER): {}: orphans will not be reaped here",
                std::strerror(errno));
  }
  return true;
}

}  // namespace k8sbridge
