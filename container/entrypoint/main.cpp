// k8sbridge-entrypoint: the command of the controller and login images
// (docs/deploy.md, "Entrypoints"). A thin main over container::RunEntrypoint.
#include <cstdlib>
#include <string>
#include <vector>

#include "k8sbridge/container/daemon_system.h"
#include "k8sbridge/container/entrypoint.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/supervise.h"

namespace k8sbridge {
namespace {

constexpr std::string_view kUsage =
    "usage: k8sbridge-entrypoint controller [SLURMCTLD-ARGS...]\n"
    "       k8sbridge-entrypoint login [COMMAND...]\n"
    "       k8sbridge-entrypoint --help | --version\n"
    "The command of the controller and login images. Both check the munge key\n"
    "(K8SBRIDGE_MUNGED_KEY, default /etc/munge/munge.key) and start munged with a\n"
    "private copy of it. controller then checks the Slurm configuration directory\n"
    "(K8SBRIDGE_SLURM_CONF_DIR, default /etc/slurm) and that slurmctld is the Slurm\n"
    "k8sbridge was built for, and runs slurmctld -D -f DIR/slurm.conf SLURMCTLD-ARGS.\n"
    "login checks srun's version and runs COMMAND (default: sleep infinity).\n"
    "As PID 1 (or with K8SBRIDGE_INIT=1) the command runs as a supervised child:\n"
    "signals passed on, orphans reaped, munged stopped after it.\n"
    "Exit codes: 2 bad arguments or settings, 1 a check failed (the reason is one\n"
    "line on stderr and in /dev/termination-log), otherwise the command's (128+N:\n"
    "killed by signal N). docs/deploy.md lists every setting.\n";

int Run(int argc, char** argv) {
  // Only the role may be --help: what follows it is slurmctld's or the login command's.
  auto parse = [](std::vector<std::string> args) {
    return container::EntrypointSettingsFromEnv(std::getenv, std::move(args));
  };
  auto run = [](const container::EntrypointSettings& settings, Logger& log) {
    container::RealDaemonSystemOf<container::DaemonSystem> system(log);
    return container::RunEntrypoint(settings, system, log);
  };
  return EntrypointMain(argc, argv, "k8sbridge-entrypoint", kUsage, parse, run);
}

}  // namespace
}  // namespace k8sbridge

int main(int argc, char** argv) {
  return k8sbridge::Run(argc, argv);
}
