#include "k8sbridge/jail/writable_layer.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace k8sbridge::jail {
namespace {

std::string Errno(int err) {
  return std::strerror(err);
}

// overlayfs splits its options at ',' and its lower layers at ':', and '\'
// escapes both: a path holding one would name other layers than meant.
Status CheckOverlayOptionPath(const std::string& path) {
  if (path.find_first_of(",:\\") == std::string::npos)
    return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{} holds ',', ':' or '\\', which overlayfs options cannot carry: choose a --state-file "
      "whose directory has none",
      path));
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return Status::IoError(fmt::format("cannot create {}: {}", path, Errno(errno)));
  }
  return Status::Ok();
}

// The upper layer's root is what tasks see as the directory: it gets the jail
// directory's owner and mode.
Status MakeUpperLike(const std::string& upper, int dir_fd, const std::string& dir) {
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0)
    return Status::IoError(fmt::format("cannot stat {}: {}", dir, Errno(errno)));
  if (Status s = MakeDir(upper, st.st_mode & 07777); !s.ok())
    return s;
  if (::chown(upper.c_str(), st.st_uid, st.st_gid) != 0) {
    return Status::IoError(fmt::format("cannot chown {}: {}", upper, Errno(errno)));
  }
  return Status::Ok();
}

}  // namespace

std::string OverlayStagingDir(const std::string& state_file) {
  return (std::filesystem::path(state_file).parent_path() / "overlay-staging").string();
}

WritableLayers::WritableLayers(std::string staging_dir) : staging_dir_(std::move(staging_dir)) {}

WritableLayers::~WritableLayers() {
  if (staging_mounted_)
    (void)Finish();
}

Status WritableLayers::MountStaging() {
  if (Status s = CheckOverlayOptionPath(staging_dir_); !s.ok())
    return s;
  std::error_code ec;
  std::filesystem::create_directories(staging_dir_, ec);
  if (ec) {
    return Status::IoError(fmt::format("cannot create {}: {}", staging_dir_, ec.message()));
  }
  if (::mount("tmpfs", staging_dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=1m,mode=0700") != 0) {
    return Status::IoError(
        fmt::format("cannot mount a tmpfs on {}: {}: the per-pod writable "
                    "layer needs CAP_SYS_ADMIN (a privileged worker pod)",
                    staging_dir_, Errno(errno)));
  }
  staging_mounted_ = true;
  return Status::Ok();
}

Status WritableLayers::Cover(int dir_fd, const std::string& dir, Logger& log) {
  if (!staging_mounted_) {
    if (Status s = MountStaging(); !s.ok())
      return s;
  }
  std::string base = fmt::format("{}/{}", staging_dir_, layers_++);
  std::string upper = base + "/upper";
  std::string work = base + "/work";
  if (Status s = MakeDir(base, 0700); !s.ok())
    return s;
  if (Status s = MakeUpperLike(upper, dir_fd, dir); !s.ok())
    return s;
  if (Status s = MakeDir(work, 0700); !s.ok())
    return s;
  // The descriptor's /proc path names exactly the directory resolved beneath
  // the jail, both as the lower layer and as the mount point.
  std::string at = fmt::format("/proc/self/fd/{}", dir_fd);
  std::string options = fmt::format("lowerdir={},upperdir={},workdir={}", at, upper, work);
  if (::mount("overlay", at.c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    return Status::IoError(fmt::format(
        "cannot mount a writable layer (overlayfs on tmpfs) on jail directory {}: {}: create "
        "the GPU driver's mount points in {} once, from a pod that mounts the jail writable",
        dir, Errno(errno), dir));
  }
  log.Info(
      "jail directory {} is read-only: a per-pod writable layer (overlayfs on tmpfs) holds the "
      "GPU driver's mount points",
      dir);
  return Status::Ok();
}

Status WritableLayers::Finish() {
  if (!staging_mounted_)
    return Status::Ok();
  staging_mounted_ = false;
  if (::umount2(staging_dir_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
    return Status::IoError(
        fmt::format("cannot detach the staging tmpfs {}: {}", staging_dir_, Errno(errno)));
  }
  return Status::Ok();
}

}  // namespace k8sbridge::jail
