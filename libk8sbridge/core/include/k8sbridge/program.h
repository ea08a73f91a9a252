// What every k8sbridge program answers before it looks at anything else, the way
// Unix programs do: --help (or -h) prints the usage on stdout and exits 0;
// --version prints k8sbridge's version and the Slurm release it was built for.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge {

// "k8sbridge-power (k8sbridge 0.1.0), built for Slurm 24.11.5"
std::string VersionLine(std::string_view program);

// The Slurm release this build was configured against (meson's slurm_version):
// the one a container's daemon must be, to the micro version.
std::string_view BuiltForSlurm();

// Writes `message` where Kubernetes reads a failed container's reason
// (terminationMessagePath, /dev/termination-log), which `kubectl describe pod`
// shows. Only if the file is there (it is in every container): never created.
void WriteTerminationMessage(std::string_view message);

// A container entrypoint's end on a failure: the reason as one error line on
// stderr and in the termination message. Returns `exit_code`.
int ReportFatal(Logger& log, const Status& status, int exit_code);

// When an argument before "--" is --help, -h or --version: prints the answer on
// stdout and returns the exit status (0). Otherwise nullopt: the program goes on.
std::optional<int> AnswerHelpOrVersion(int argc, char** argv, std::string_view program,
                                       std::string_view usage);

}  // namespace k8sbridge
