#include "k8sbridge/jail/gpu_driver.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>

namespace k8sbridge::jail {

namespace {

// Libraries: the prefix before the version (libcuda.so, libcuda.so.1,
// libcuda.so.550.54.15 all start with "libcuda.so").
constexpr std::array<std::string_view, 8> kLibraryPrefixes = {
    "libcuda.so",       "libcudadebugger.so", "libnvcuvid.so",       "libnvoptix.so",
    "libGLX_nvidia.so", "libEGL_nvidia.so",   "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so"};

constexpr std::array<std::string_view, 5> kTools = {
    "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server"};

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);  // follows links
}

}  // namespace

bool IsGpuDriverFileName(std::string_view name) {
  if (name.starts_with("libnvidia-") && name.find(".so") != std::string_view::npos)
    return true;
  for (std::string_view prefix : kLibraryPrefixes) {
    if (name.starts_with(prefix))
      return true;
  }
  return std::find(kTools.begin(), kTools.end(), name) != kTools.end();
}

std::vector<std::string> FindGpuDriverFiles(const std::vector<std::string>& dirs) {
  std::vector<std::string> found;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      std::string path = it->path().string();
      if (IsGpuDriverFileName(it->path().filename().string()) && IsRegularFile(path))
        found.push_back(std::move(path));
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

void AddGpuDriverFiles(PrepareConfig& config, const std::vector<std::string>& dirs, Logger& log) {
  size_t added = 0;
  for (std::string& path : FindGpuDriverFiles(dirs)) {
    if (std::find(config.gpu_libs.begin(), config.gpu_libs.end(), path) != config.gpu_libs.end())
      continue;
    config.gpu_libs.push_back(std::move(path));
    ++added;
  }
  if (added > 0)
    log.Info("binding the GPU driver's {} files that the container runtime provided", added);
}

}  // namespace k8sbridge::jail
