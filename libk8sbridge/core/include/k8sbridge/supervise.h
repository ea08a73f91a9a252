// A container's PID 1: the kernel gives it two duties no daemon does for itself.
// A signal the runtime sends (docker stop, kubelet's SIGTERM) reaches only PID 1,
// which ignores it unless it handles it; and every orphan (a slurmstepd whose
// slurmd went, a daemonized munged) is reparented to it and stays a zombie until
// it waits for it. Supervise() runs the container's daemon as a child, passes
// the signals on, reaps every zombie and ends with the daemon's exit status.
// The system calls are behind InitSystem, so the decisions are unit-tested.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/status.h"

namespace k8sbridge {

// What PID 1 passes on to its child: the stop signals of runtimes and kubectl,
// and the ones Slurm's daemons use to reconfigure (HUP) and reopen logs (USR2).
const std::vector<int>& ForwardedSignals();

// A child that has ended, as waitpid reports it.
struct Reaped {
  int pid = 0;
  int wait_status = 0;
};

// The exit status a shell gives: the child's own, or 128 + the signal that killed it.
int ExitCodeOf(int wait_status);
// "exited with status 3", "was killed by SIGTERM".
std::string DescribeWaitStatus(int wait_status);

class InitSystem {
 public:
  virtual ~InitSystem() = default;
  virtual Clock& clock() = 0;
  // Starts argv as a child, with no signal blocked.
  virtual Result<int> Spawn(const std::vector<std::string>& argv) = 0;
  // Waits up to `timeout` for a forwarded signal or SIGCHLD; nullopt on timeout.
  virtual std::optional<int> NextSignal(std::chrono::milliseconds timeout) = 0;
  // One ended child, without waiting; nullopt when none is waiting to be reaped.
  virtual std::optional<Reaped> ReapOne() = 0;
  virtual void Signal(int pid, int signal) = 0;
  // False once `pid` is gone (a process that is not our child cannot be reaped).
  virtual bool Alive(int pid) = 0;
};

// A process started before the daemon (the container's munged) that must not
// outlive it.
struct Companion {
  int pid = 0;
  std::string name;
};

struct SuperviseRequest {
  std::vector<std::string> argv;
  std::string name;  // for the log: "slurmd"
  std::vector<Companion> companions;
  // How long a companion has after SIGTERM before it gets SIGKILL.
  std::chrono::milliseconds companion_grace{5000};
};

// Sends SIGTERM to each companion still there and waits, reaping, until all are
// gone; SIGKILLs those left after `grace`.
void StopCompanions(const std::vector<Companion>& companions, std::chrono::milliseconds grace,
                    InitSystem& system, Logger& log);

// Runs the request's daemon to its end; returns its exit code (ExitCodeOf).
// Fails only when the daemon cannot be started; the companions are stopped either way.
Result<int> Supervise(const SuperviseRequest& request, InitSystem& system, Logger& log);

// The real system calls. Constructing it blocks the forwarded signals and SIGCHLD
// (they are then read with sigtimedwait); destroying it restores the mask.
class RealInitSystem final : public InitSystem {
 public:
  RealInitSystem();
  ~RealInitSystem() override;
  RealInitSystem(const RealInitSystem&) = delete;
  RealInitSystem& operator=(const RealInitSystem&) = delete;

  Clock& clock() override { return RealClock::Instance(); }
  Result<int> Spawn(const std::vector<std::string>& argv) override;
  std::optional<int> NextSignal(std::chrono::milliseconds timeout) override;
  std::optional<Reaped> ReapOne() override;
  void Signal(int pid, int signal) override;
  bool Alive(int pid) override;

 private:
  struct SavedMask;
  std::unique_ptr<SavedMask> saved_;
};

// fork + exec of argv with no signal blocked in the child (PID 1 blocks the ones it
// waits for) and, when `stdout_fd` or `stderr_fd` >= 0, its stdout or stderr on that
// descriptor. A child that cannot exec says so on stderr and exits 127. Returns its
// pid.
Result<int> SpawnProcess(const std::vector<std::string>& argv, int stdout_fd = -1,
                         int stderr_fd = -1);

// Whether the entrypoint takes on PID 1's duties: when it is PID 1, or when
// `forced` (the K8SBRIDGE_INIT=1 of tests outside a PID namespace). When it does,
// orphans of its descendants become its own (PR_SET_CHILD_SUBREAPER), as they
// are PID 1's in a container; called before anything daemonizes.
bool TakeOnInitDuties(bool forced, Logger& log);

// A container entrypoint's exit codes besides its daemon's own.
inline constexpr int kExitCheckFailed = 1;  // a check failed (docs/deploy.md, "Entrypoints")
inline constexpr int kExitBadSettings = 2;  // bad arguments or environment

// The main of a container entrypoint (k8sbridge-worker, k8sbridge-entrypoint):
// --help/--version on the first argument only (the rest are the daemon's), then
// `parse(args)` to settings with a `supervise` field (K8SBRIDGE_INIT), then
// `run(settings, log)` to the daemon's exit code. A failure is one error line on
// stderr and in the termination message.
template <typename Parse, typename Run>
int EntrypointMain(int argc, char** argv, std::string_view program, std::string_view usage,
                   Parse parse, Run run) {
  if (argc > 1) {
    if (auto answered = AnswerHelpOrVersion(2, argv, program, usage))
      return *answered;
  }
  StderrLogger log{std::string(program)};
  auto settings = parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!settings.ok())
    return ReportFatal(log, settings.status(), kExitBadSettings);
  settings->supervise = TakeOnInitDuties(settings->supervise, log);
  Result<int> code = run(*settings, log);
  if (!code.ok())
    return ReportFatal(log, code.status(), kExitCheckFailed);
  return *code;
}

}  // namespace k8sbridge
