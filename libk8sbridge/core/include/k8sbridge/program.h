// What every k8sbridge program answers before it looks at anything else, the way
// Unix programs do: --help (or -h) prints the usage on stdout and exits 0;
// --version prints k8sbridge's version and the Slurm release it was built for.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace k8sbridge {

// "k8sbridge-power (k8sbridge 0.1.0), built for Slurm 24.11.5"
std::string VersionLine(std::string_view program);

// When an argument before "--" is --help, -h or --version: prints the answer on
// stdout and returns the exit status (0). Otherwise nullopt: the program goes on.
std::optional<int> AnswerHelpOrVersion(int argc, char** argv, std::string_view program,
                                       std::string_view usage);

}  // namespace k8sbridge
