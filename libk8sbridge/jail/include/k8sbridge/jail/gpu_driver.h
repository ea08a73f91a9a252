// The NVIDIA driver's user-space files in the worker container. The container
// runtime that hands a pod its GPUs (the NVIDIA container toolkit, through the
// node group's RuntimeClass) binds the driver's libraries (libcuda, NVML, ...)
// and tools (nvidia-smi) into the container's root and links their sonames
// there. Jail tasks run on the jail's root, where none of them are, so
// k8sbridge-jail-prepare binds each one found into the jail at the same path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/jail/prepare.h"
#include "k8sbridge/log.h"

namespace k8sbridge::jail {

// Where the toolkit puts them on Debian-like and RPM-like roots (/lib is /usr/lib
// on a merged-/usr root, so it is not searched twice).
inline const std::vector<std::string> kGpuDriverDirs = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/bin"};

// True for a file name of the driver's user space: libcuda.so*, libnvidia-*.so*,
// libnvcuvid.so*, the NVIDIA GL vendor libraries, nvidia-smi and the driver's
// other tools.
bool IsGpuDriverFileName(std::string_view name);

// The driver's files in `dirs`, by the names they have there (a soname link and
// the versioned file it names both count: a task loads the soname), sorted.
// Only names that resolve to a regular file are kept: a dangling link would stop
// the preparation.
std::vector<std::string> FindGpuDriverFiles(const std::vector<std::string>& dirs);

// Adds the files FindGpuDriverFiles finds in `dirs` to config.gpu_libs, except
// those already listed (--gpu-lib), and logs how many it found.
void AddGpuDriverFiles(PrepareConfig& config, const std::vector<std::string>& dirs, Logger& log);

}  // namespace k8sbridge::jail
