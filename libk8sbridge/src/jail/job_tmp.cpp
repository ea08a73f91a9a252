#include "k8sbridge/jail/job_tmp.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace k8sbridge::jail {
namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    int err = errno;
    return Status::IoError(fmt::format("cannot create {}: {}", path, std::strerror(err)));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IoError(fmt::format("{} exists but is not a directory: remove it", path));
  }
  if ((st.st_mode & 07777) != mode && ::chmod(path.c_str(), mode) != 0) {
    int err = errno;
    return Status::IoError(fmt::format("cannot chmod {}: {}", path, std::strerror(err)));
  }
  return Status::Ok();
}

// Empties the directory `dirfd` (which it closes), staying on device `dev`.
Status RemoveContents(int dirfd, dev_t dev, const std::string& where) {
  DIR* dir = ::fdopendir(dirfd);
  if (dir == nullptr) {
    int err = errno;
    ::close(dirfd);
    return Status::IoError(fmt::format("cannot list {}: {}", where, std::strerror(err)));
  }
  Status result;
  while (struct dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..")
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    std::string path = where + "/" + e->d_name;
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != dev) {
        result = Status::IoError(fmt::format("{} is a mount point: not removing it", path));
        continue;
      }
      int sub = ::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0)
        continue;
      Status s = RemoveContents(sub, dev, path);
      if (!s.ok())
        result = s;
      if (::unlinkat(::dirfd(dir), e->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        result = Status::IoError(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
      }
    } else if (::unlinkat(::dirfd(dir), e->d_name, 0) != 0 && errno != ENOENT) {
      result = Status::IoError(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
    }
  }
  ::closedir(dir);
  return result;
}

}  // namespace

std::string JobTmpPath(const std::string& tmp_base, const std::string& node, uint32_t job_id) {
  return fmt::format("{}/{}/job{}", tmp_base, node, job_id);
}

Status CreateNodeDir(const std::string& tmp_base, const std::string& node) {
  if (node.empty() || node.find('/') != std::string::npos || node == "." || node == "..") {
    return Status::InvalidArgument(fmt::format("node name '{}' cannot name a directory", node));
  }
  // Parents of tmp_base (e.g. /var/lib/k8sbridge) may be missing on a fresh node.
  std::string partial;
  for (size_t pos = 1; (pos = tmp_base.find('/', pos)) != std::string::npos; ++pos) {
    partial = tmp_base.substr(0, pos);
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError(fmt::format("cannot create {}: {}", partial, std::strerror(errno)));
    }
  }
  if (Status s = MakeDir(tmp_base, 0700); !s.ok())
    return s;
  return MakeDir(tmp_base + "/" + node, 0700);
}

Status CreateJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id) {
  if (Status s = CreateNodeDir(tmp_base, node); !s.ok())
    return s;
  return MakeDir(JobTmpPath(tmp_base, node, job_id), 01777);
}

Status RemoveJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id) {
  std::string path = JobTmpPath(tmp_base, node, job_id);
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return Status::Ok();
    return Status::IoError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IoError(fmt::format("cannot stat {}: {}", path, std::strerror(err)));
  }
  Status s = RemoveContents(fd, st.st_dev, path);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IoError(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
  }
  return s;
}

}  // namespace k8sbridge::jail
