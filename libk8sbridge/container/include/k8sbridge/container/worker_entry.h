// k8sbridge-worker, the worker pod's command: check that the image's slurmd is
// the Slurm k8sbridge was built for, prove the pod holds the controller's munge
// key, wait (bounded) for the shared jail, prepare it, and run
// `slurmd -D -b -N <node>`: exec'd, or as PID 1's supervised child when the
// worker is the container's PID 1. Settings come from the environment that
// RenderWorkerPod writes; docs/power.md ("The worker entrypoint") lists them.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/container/container_start.h"
#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::container {

struct WorkerSettings {
  std::string node;              // K8SBRIDGE_NODE_NAME
  std::string cluster;           // K8SBRIDGE_CLUSTER
  std::string munge_credential;  // K8SBRIDGE_MUNGE_CHECK; "" = no check
  // The pod's munged; started by the worker only when munged.key is set.
  MungedSettings munged;
  std::string jail;  // "" = no jail
  std::chrono::milliseconds jail_wait{120'000};
  std::string jail_prepare;  // k8sbridge-jail-prepare and its arguments; "" = don't run
  std::string slurmd = "/usr/sbin/slurmd";
  std::string slurm_version;             // the Slurm slurmd must be: BuiltForSlurm()
  bool supervise = false;                // run slurmd as PID 1's child, not exec it
  std::string conf_server;               // K8SBRIDGE_CONF_SERVER
  std::vector<std::string> slurmd_args;  // the container's args: appended to slurmd's
};

// Reads the settings; an unusable value names the variable and the fix.
// `supervise` is set from K8SBRIDGE_INIT=1 only: the caller adds "am I PID 1".
Result<WorkerSettings> WorkerSettingsFromEnv(const std::function<const char*(const char*)>& getenv,
                                             std::vector<std::string> args);

// The outside world of the worker.
class WorkerSystem : public DaemonSystem {
 public:
  // True when `path` is a mount point holding a root filesystem (usr/ inside).
  virtual Result<bool> IsMountedRootfs(const std::string& path) = 0;
};

// The whole entrypoint. Returns the reason the pod must fail, or slurmd's exit
// code when it ran supervised (0 after an Exec, which returns only in fakes).
// `munge` talks to the pod's munged.
Result<int> RunWorker(const WorkerSettings& settings, WorkerSystem& system, MungeCodec& munge,
                      Logger& log);

// slurmd's command line for these settings.
std::vector<std::string> SlurmdCommand(const WorkerSettings& settings);

}  // namespace k8sbridge::container
