#include "k8sbridge/jail/paths.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace k8sbridge::jail {
namespace {

std::string Errno(int err) {
  return std::strerror(err);
}

constexpr uint64_t kBeneath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

std::string Relative(std::string_view path) {
  while (!path.empty() && path.front() == '/')
    path.remove_prefix(1);
  return path.empty() ? std::string(".") : std::string(path);
}

Status ResolveError(int err, std::string_view path, std::string_view jail_name) {
  if (err == EXDEV || err == ELOOP) {
    return Status::PermissionDenied(fmt::format(
        "path {} in jail {} resolves through a symlink out of the jail: replace the symlink "
        "with a directory, or bind to its real location inside the jail",
        path, jail_name));
  }
  if (err == ENOENT) {
    return Status::NotFound(fmt::format("path {} does not exist in jail {}", path, jail_name));
  }
  return Status::IoError(fmt::format("cannot open {} in jail {}: {}", path, jail_name, Errno(err)));
}

// "is owned by uid N" or "is writable by others (mode 0777)" for `st`, or "".
std::string Untrusted(const struct stat& st, uid_t owner, bool sticky_ok) {
  if (st.st_uid != 0 && st.st_uid != owner)
    return fmt::format("is owned by uid {}, not root", st.st_uid);
  bool writable = st.st_mode & (S_IWGRP | S_IWOTH);
  if (writable && !(sticky_ok && (st.st_mode & S_ISVTX))) {
    return fmt::format("is writable by {} (mode {:04o})",
                       (st.st_mode & S_IWOTH) ? "others" : "its group", st.st_mode & 07777);
  }
  return "";
}

}  // namespace

int OpenAt2(int dirfd, const char* path, uint64_t flags, uint64_t resolve) {
  struct open_how how {};
  how.flags = flags;
  how.resolve = resolve;
  long rc;
  do {
    rc = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  } while (rc < 0 && errno == EAGAIN);  // RESOLVE_BENEATH retries on a concurrent rename
  return static_cast<int>(rc);
}

Status CheckTrustedParents(const std::string& path, uid_t owner, std::string_view what) {
  // Checked top-down by path: once a directory is trusted, nobody else can
  // replace what lies in it, so the next lookup by path is as good as by fd.
  for (size_t pos = 0; pos != std::string::npos && pos < path.size();) {
    std::string dir = pos == 0 ? "/" : path.substr(0, pos);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
      int err = errno;
      return Status::NotFound(
          fmt::format("{} {}: {} cannot be read: {}", what, path, dir, Errno(err)));
    }
    if (!S_ISDIR(st.st_mode)) {
      return Status::PermissionDenied(
          fmt::format("{} {}: {} is a symlink or not a directory: give the real path (realpath {})",
                      what, path, dir, path));
    }
    if (std::string why = Untrusted(st, owner, true); !why.empty()) {
      return Status::PermissionDenied(fmt::format(
          "{} {}: its parent {} {}: refusing it (chown root {} and chmod go-w {}, or choose a "
          "path whose parents only root can change)",
          what, path, dir, why, dir, dir));
    }
    pos = path.find('/', pos + 1);
  }
  return Status::Ok();
}

Status CheckTrustedDir(const std::string& path, uid_t owner, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    int err = errno;
    return Status::NotFound(fmt::format("{} {} cannot be read: {}", what, path, Errno(err)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::PermissionDenied(fmt::format(
        "{} {} is a symlink or not a directory: refusing it (use a real directory)", what, path));
  }
  if (st.st_uid != owner) {
    return Status::PermissionDenied(
        fmt::format("{} {} is owned by uid {}, not {}: refusing it (chown {} {})", what, path,
                    st.st_uid, owner, owner, path));
  }
  if (std::string why = Untrusted(st, owner, false); !why.empty()) {
    return Status::PermissionDenied(
        fmt::format("{} {} {}: refusing it (chmod go-w {})", what, path, why, path));
  }
  return Status::Ok();
}

Result<UniqueFd> OpenHostPath(const std::string& path, std::string_view what) {
  int fd = OpenAt2(AT_FDCWD, path.c_str(), O_PATH | O_CLOEXEC,
                   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0)
    return UniqueFd(fd);
  int err = errno;
  if (err == ELOOP) {
    return Status::PermissionDenied(fmt::format(
        "{} {} is a symlink or has a symlink (or a /proc magic link) in its path: refusing it, "
        "since it could be swapped under the mount; give the real path (realpath {})",
        what, path, path));
  }
  if (err == ENOENT)
    return Status::NotFound(fmt::format("{} {} does not exist on this node", what, path));
  return Status::IoError(fmt::format("cannot open {} {}: {}", what, path, Errno(err)));
}

Status BindTree(int source_fd, int target_fd, bool recursive, bool read_only) {
  unsigned rec = recursive ? AT_RECURSIVE : 0;
  UniqueFd tree(static_cast<int>(::syscall(
      SYS_open_tree, source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | rec)));
  if (!tree.valid())
    return Status::IoError(fmt::format("open_tree: {}", Errno(errno)));
  if (read_only) {
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH | rec, &attr, sizeof attr) != 0)
      return Status::IoError(fmt::format("mount_setattr(MOUNT_ATTR_RDONLY): {}", Errno(errno)));
  }
  if (::syscall(SYS_move_mount, tree.get(), "", target_fd, "",
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return Status::IoError(fmt::format("move_mount: {}", Errno(errno)));
  return Status::Ok();
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string UniqueFd::ProcPath() const {
  return fmt::format("/proc/self/fd/{}", fd_);
}

Status CheckJailRoot(const std::string& jail, uid_t owner) {
  struct stat st {};
  if (::stat(jail.c_str(), &st) != 0) {
    int err = errno;
    return Status::NotFound(
        fmt::format("jail {} cannot be read: {}: is the shared jail volume mounted on this node?",
                    jail, Errno(err)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        fmt::format("jail {} is not a directory: point jail= at the jail's root directory", jail));
  }
  if (st.st_uid != owner) {
    return Status::PermissionDenied(
        fmt::format("jail {} is owned by uid {}, not {}: refusing it (chown {} {})", jail,
                    st.st_uid, owner, owner, jail));
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status::PermissionDenied(
        fmt::format("jail {} is writable by {} (mode {:04o}): refusing it (chmod go-w {})", jail,
                    (st.st_mode & S_IWOTH) ? "others" : "its group", st.st_mode & 07777, jail));
  }
  if (Status s = CheckTrustedParents(jail, owner, "jail"); !s.ok())
    return s;
  // A missing etc/ or usr/ is the probe's to report (a jail without them runs nothing).
  for (const char* sub : {"etc", "usr"}) {
    std::string path = jail + "/" + sub;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT)
      continue;
    if (Status s = CheckTrustedDir(path, owner, "jail directory"); !s.ok())
      return s;
  }
  return Status::Ok();
}

Result<UniqueFd> OpenJailRoot(const std::string& jail) {
  int fd = ::open(jail.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status::NotFound(fmt::format("cannot open jail {}: {}", jail, Errno(err)));
  }
  return UniqueFd(fd);
}

Result<UniqueFd> OpenBeneath(int jail_fd, std::string_view path, std::string_view jail_name) {
  std::string rel = Relative(path);
  int fd = OpenAt2(jail_fd, rel.c_str(), O_PATH | O_CLOEXEC, kBeneath);
  if (fd < 0)
    return ResolveError(errno, path, jail_name);
  return UniqueFd(fd);
}

Result<UniqueFd> MakePathBeneath(int jail_fd, std::string_view path, bool last_is_file,
                                 std::string_view jail_name) {
  std::string rel = Relative(path);
  if (rel == ".")
    return OpenBeneath(jail_fd, ".", jail_name);
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t pos = rel.find('/', start);
    std::string part =
        rel.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    if (!part.empty() && part != ".")
      parts.push_back(part);
    if (pos == std::string::npos)
      break;
    start = pos + 1;
  }
  // Walk one component at a time, each resolved beneath the previous directory
  // descriptor, itself beneath the jail: no component can be a symlink that
  // leaves the jail, even if it is swapped in while we walk.
  UniqueFd dir(OpenAt2(jail_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, kBeneath));
  if (!dir.valid())
    return ResolveError(errno, path, jail_name);
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    walked += "/" + part;
    bool last = i + 1 == parts.size();
    UniqueFd next(OpenAt2(dir.get(), part.c_str(), O_PATH | O_CLOEXEC, kBeneath));
    if (!next.valid() && errno == ENOENT) {
      // The directory descriptor is O_PATH: mkdirat/openat need a real one.
      UniqueFd real(OpenAt2(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, kBeneath));
      if (!real.valid())
        return ResolveError(errno, walked, jail_name);
      int rc;
      if (last && last_is_file) {
        rc = ::openat(real.get(), part.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (rc >= 0)
          ::close(rc);
      } else {
        rc = ::mkdirat(real.get(), part.c_str(), 0755);
      }
      if (rc < 0 && errno == EROFS) {
        return Status::PermissionDenied(fmt::format(
            "cannot create {} in jail {}: the jail is mounted read-only here; create {} in the "
            "jail once, from a pod that mounts it writable (such as the populate job)",
            walked, jail_name, walked));
      }
      if (rc < 0 && errno != EEXIST) {
        int err = errno;
        return Status::IoError(
            fmt::format("cannot create {} in jail {}: {}", walked, jail_name, Errno(err)));
      }
      next = UniqueFd(OpenAt2(dir.get(), part.c_str(), O_PATH | O_CLOEXEC, kBeneath));
    }
    if (!next.valid())
      return ResolveError(errno, walked, jail_name);
    dir = std::move(next);
  }
  return dir;
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return Status::NotFound(fmt::format("{} does not exist", path));
    return Status::IoError(fmt::format("cannot open {}: {}", path, Errno(err)));
  }
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Status::IoError(fmt::format("cannot read {}: {}", path, Errno(err)));
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace k8sbridge::jail
