#include "k8sbridge/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace k8sbridge {

Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    return Status::IoError(fmt::format(
        "cannot create {}: {}{}", tmp, std::strerror(err),
        err == EACCES || err == EPERM ? " (is its directory writable by this user?)" : ""));
  }
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IoError(fmt::format("cannot write {}: {}", tmp, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::IoError(fmt::format("cannot sync {}: {}", tmp, std::strerror(err)));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::IoError(
        fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(err)));
  }
  return Status::Ok();
}

}  // namespace k8sbridge
