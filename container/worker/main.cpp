// k8sbridge-worker: the command of a worker pod (docs/power.md, "The worker
// entrypoint"). A thin main over container::RunWorker: the real outside world here,
// the logic and its tests in libk8sbridge.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "k8sbridge/container/daemon_system.h"
#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/container/worker_entry.h"
#include "k8sbridge/jail/prepare.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/supervise.h"

namespace k8sbridge {
namespace {

class RealWorkerSystem final : public container::RealDaemonSystemOf<container::WorkerSystem> {
 public:
  using RealDaemonSystemOf::RealDaemonSystemOf;

  Result<bool> IsMountedRootfs(const std::string& path) override {
    char real[PATH_MAX];
    if (realpath(path.c_str(), real) == nullptr)
      return false;
    auto mounts = jail::MountPoints();
    if (!mounts.ok())
      return mounts.status();
    if (std::find(mounts->begin(), mounts->end(), std::string(real)) == mounts->end())
      return false;
    struct stat st {};
    return stat((std::string(real) + "/usr").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
};

constexpr std::string_view kUsage =
    "usage: k8sbridge-worker [SLURMD-ARGS...]\n"
    "       k8sbridge-worker --help | --version\n"
    "The worker pod's command: checks that slurmd is the Slurm k8sbridge was built for\n"
    "and the munge key, prepares the jail, then runs slurmd -D -b with SLURMD-ARGS:\n"
    "exec'd, or as its supervised child when k8sbridge-worker is PID 1 (or\n"
    "K8SBRIDGE_INIT=1), with slurmd's exit code. Its settings come from the\n"
    "K8SBRIDGE_* environment that k8sbridge-power sets (docs/power.md).\n"
    "Exit codes: 2 bad settings, 1 a check failed (the reason is one line on stderr\n"
    "and in /dev/termination-log), otherwise slurmd's (128+N: killed by signal N).\n";

int Run(int argc, char** argv) {
  auto parse = [](std::vector<std::string> args) {
    return container::WorkerSettingsFromEnv(std::getenv, std::move(args));
  };
  auto run = [](const container::WorkerSettings& settings, Logger& log) {
    RealWorkerSystem system(log);
    container::LibMungeCodec munge(settings.munged.socket);
    return container::RunWorker(settings, system, munge, log);
  };
  return EntrypointMain(argc, argv, "k8sbridge-worker", kUsage, parse, run);
}

}  // namespace
}  // namespace k8sbridge

int main(int argc, char** argv) {
  return k8sbridge::Run(argc, argv);
}
