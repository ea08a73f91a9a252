// k8sbridge-jail-prepare: makes the shared jail usable on this host (pod). The
// worker entrypoint runs it once before starting slurmd; see docs/jail.md and
// libk8sbridge/include/k8sbridge/jail/prepare.h.
#include <string>
#include <vector>

#include "k8sbridge/jail/gpu_driver.h"
#include "k8sbridge/jail/prepare.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"

int main(int argc, char** argv) {
  if (auto answered = k8sbridge::AnswerHelpOrVersion(argc, argv, "k8sbridge-jail-prepare",
                                                     k8sbridge::jail::kPrepareUsage))
    return *answered;
  k8sbridge::StderrLogger log("k8sbridge-jail-prepare");
  std::vector<std::string> args(argv + 1, argv + argc);
  bool undo = false;
  auto config = k8sbridge::jail::ParsePrepareArgs(args, &undo);
  if (!config.ok()) {
    log.Error("{}", config.status().message());
    return 2;
  }
  if (!undo)
    k8sbridge::jail::AddGpuDriverFiles(*config, k8sbridge::jail::kGpuDriverDirs, log);
  k8sbridge::Status s = undo ? k8sbridge::jail::UndoPrepare(*config, log)
                             : k8sbridge::jail::PrepareJail(*config, log);
  if (!s.ok()) {
    log.Error("{}", s.message());
    return 1;
  }
  return 0;
}
