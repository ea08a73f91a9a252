// Per-pod writable layers over read-only jail directories. Worker pods mount the
// shared jail read-only, so a GPU driver file that the container runtime
// injected (its versioned name depends on the site's driver) has no mount point
// in the jail, and none can be made there. k8sbridge-jail-prepare then covers
// that jail directory with an overlayfs whose lower layer is the directory
// itself and whose upper layer is a small tmpfs of the pod's: the mount point
// is made in the upper layer, the jail on disk is untouched, and the layer goes
// with the pod's mount namespace.
//
// The tmpfs is mounted once per run, at a staging directory beside the state
// files, when the first layer needs it, and lazily detached when the run is
// done: the overlays keep it alive, nothing else can reach it, and nothing is
// left to clean up.
#pragma once

#include <string>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// Where the staging tmpfs is mounted: "overlay-staging" in the state file's
// directory (/run/k8sbridge/jail-prepare/overlay-staging by default).
std::string OverlayStagingDir(const std::string& state_file);

class WritableLayers {
 public:
  explicit WritableLayers(std::string staging_dir);
  WritableLayers(const WritableLayers&) = delete;
  WritableLayers& operator=(const WritableLayers&) = delete;
  ~WritableLayers();  // detaches the staging tmpfs when Finish was not reached

  // Mounts an overlayfs on the directory `dir_fd` (an O_PATH descriptor
  // resolved beneath the jail; `dir` is its path on the host, for messages)
  // with that same directory as its lower layer, resolved through the
  // descriptor before the overlay covers it. Its upper layer has the
  // directory's owner and mode.
  Status Cover(int dir_fd, const std::string& dir, Logger& log);

  // Lazily detaches the staging tmpfs, if a layer mounted it.
  Status Finish();

 private:
  Status MountStaging();

  std::string staging_dir_;
  bool staging_mounted_ = false;
  int layers_ = 0;
};

}  // namespace k8sbridge::jail
