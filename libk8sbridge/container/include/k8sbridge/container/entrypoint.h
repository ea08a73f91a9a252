// k8sbridge-entrypoint, the command of the controller and login images
// (docs/deploy.md, "Entrypoints"):
//   controller [ARGS]: munge key, munged, the mounted Slurm configuration
//     directory, slurmctld's version, then `slurmctld -D -f <dir>/slurm.conf ARGS`;
//   login [CMD...]: munge key, munged, srun's version, then CMD (`sleep infinity`).
// The command runs as PID 1's supervised child (or is exec'd when the
// entrypoint is not PID 1), and the munged started for it is stopped after it.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/container/container_start.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::container {

inline constexpr std::string_view kDefaultMungeKey = "/etc/munge/munge.key";
inline constexpr std::string_view kDefaultSlurmConfDir = "/etc/slurm";

enum class EntrypointRole { kController, kLogin };

struct EntrypointSettings {
  EntrypointRole role = EntrypointRole::kController;
  MungedSettings munged;                                     // key: /etc/munge/munge.key
  std::string conf_dir = std::string(kDefaultSlurmConfDir);  // K8SBRIDGE_SLURM_CONF_DIR
  std::string slurmctld = "/usr/sbin/slurmctld";             // K8SBRIDGE_SLURMCTLD
  std::string srun = "/usr/bin/srun";                        // K8SBRIDGE_SRUN
  std::string slurm_version;  // the Slurm the image must hold: BuiltForSlurm()
  bool supervise = false;     // K8SBRIDGE_INIT=1; the caller adds "am I PID 1"
  // controller: the pod's KUBERNETES_SERVICE_HOST/_PORT, written to `service_file`
  // for the power programs, which slurmctld starts without them.
  std::string service_host;
  std::string service_port;
  std::string service_file = std::string(contract::kInClusterServiceFile);
  std::vector<std::string> args;  // controller: slurmctld's extra; login: the command
};

// `args` are the program's arguments: the role first. Errors name the argument or
// variable and the fix.
Result<EntrypointSettings> EntrypointSettingsFromEnv(const Getenv& getenv,
                                                     std::vector<std::string> args);

// What the container runs once the checks pass.
std::vector<std::string> EntrypointCommand(const EntrypointSettings& settings);

// The whole entrypoint: the reason the container must fail, or the command's exit
// code (0 after an Exec, which returns only in fakes).
Result<int> RunEntrypoint(const EntrypointSettings& settings, DaemonSystem& system, Logger& log);

}  // namespace k8sbridge::container
