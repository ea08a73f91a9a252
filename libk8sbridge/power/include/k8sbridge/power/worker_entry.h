// k8sbridge-worker, the worker pod's command: prove the pod holds the
// controller's munge key, wait (bounded) for the shared jail, prepare it, and
// exec `slurmd -D -b -N <node>`. Settings come from the environment that
// RenderWorkerPod writes; docs/power.md ("The worker entrypoint") lists them.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/munge_check.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

inline constexpr std::string_view kDefaultMungedDir = "/run/k8sbridge-munge";
inline constexpr std::string_view kDefaultMungeSocket = "/run/munge/munge.socket.2";

struct WorkerSettings {
  std::string node;              // K8SBRIDGE_NODE_NAME
  std::string cluster;           // K8SBRIDGE_CLUSTER
  std::string munge_credential;  // K8SBRIDGE_MUNGE_CHECK; "" = no check
  std::string munge_socket;      // the pod's munged; "" = libmunge's default
  std::string munged_key;        // start a munged of the pod's own with this key; "" = don't
  std::string munged = "/usr/sbin/munged";
  std::string munged_dir = std::string(kDefaultMungedDir);  // K8SBRIDGE_MUNGED_DIR
  std::string jail;                                         // "" = no jail
  std::chrono::milliseconds jail_wait{120'000};
  std::string jail_prepare;  // k8sbridge-jail-prepare and its arguments; "" = don't run
  std::string slurmd = "/usr/sbin/slurmd";
  std::string conf_server;               // K8SBRIDGE_CONF_SERVER
  std::vector<std::string> slurmd_args;  // the container's args: appended to slurmd's
};

// Reads the settings; an unusable value names the variable and the fix.
Result<WorkerSettings> WorkerSettingsFromEnv(const std::function<const char*(const char*)>& getenv,
                                             std::vector<std::string> args);

// The outside world of the worker.
class WorkerSystem {
 public:
  virtual ~WorkerSystem() = default;
  virtual Clock& clock() = 0;
  // Runs a program to completion; a non-zero exit is an error naming it.
  virtual Status Run(const std::vector<std::string>& argv) = 0;
  // Copies `from` to `to`, mode 0400 and owned by the caller (munged insists on
  // owning its key, whatever mode the Secret volume gave it).
  virtual Status CopyPrivateFile(const std::string& from, const std::string& to) = 0;
  // Creates `path` (and its parents) if needed and sets it to `mode`, owned by the
  // caller (an emptyDir is 0777; munged refuses directories others may write to).
  virtual Status MakeDirectory(const std::string& path, unsigned mode) = 0;
  // True when `path` is a mount point holding a root filesystem (usr/ inside).
  virtual Result<bool> IsMountedRootfs(const std::string& path) = 0;
  // Stops the daemon whose pid is in `pid_file` (the pod's munged, when the
  // worker fails after starting it).
  virtual void StopDaemon(const std::string& pid_file) = 0;
  // Replaces the process; returns only on failure (fakes record and return Ok).
  virtual Status Exec(const std::vector<std::string>& argv) = 0;
};

// The whole entrypoint. Returns the reason the pod must fail, or Ok after Exec
// (only fakes return then). `munge` talks to the pod's munged.
Status RunWorker(const WorkerSettings& settings, WorkerSystem& system, MungeCodec& munge,
                 Logger& log);

// slurmd's command line for these settings.
std::vector<std::string> SlurmdCommand(const WorkerSettings& settings);

}  // namespace k8sbridge::power
