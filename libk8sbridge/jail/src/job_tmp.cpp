#include "k8sbridge/jail/job_tmp.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/jail/paths.h"

namespace k8sbridge::jail {
namespace {

std::string Errno(int err) {
  return std::strerror(err);
}

// Makes (or finds) the directory `path` with `mode`, owned by `owner`: one
// that someone else made first is refused, never adopted.
Status MakeDir(const std::string& path, mode_t mode, uid_t owner) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    int err = errno;
    return Status::IoError(fmt::format("cannot create {}: {}", path, Errno(err)));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IoError(fmt::format("{} exists but is not a directory: remove it", path));
  }
  if (st.st_uid != owner) {
    return Status::PermissionDenied(fmt::format(
        "{} is owned by uid {}, not {}: someone else made it; refusing it (remove it: rm -rf "
        "--one-file-system {})",
        path, st.st_uid, owner, path));
  }
  if ((st.st_mode & 07777) != mode && ::chmod(path.c_str(), mode) != 0) {
    int err = errno;
    return Status::IoError(fmt::format("cannot chmod {}: {}", path, Errno(err)));
  }
  return Status::Ok();
}

Status CheckNodeName(const std::string& node) {
  if (node.empty() || node.find('/') != std::string::npos || node == "." || node == "..") {
    return Status::InvalidArgument(fmt::format("node name '{}' cannot name a directory", node));
  }
  return Status::Ok();
}

constexpr std::string_view kTmpBase = "spank_jail option tmp_base";

// tmp_base itself may be 0700 or 0755 (an administrator's choice); the chain
// above it is CheckTrustedParents'.
Status CheckTmpBase(const std::string& tmp_base, uid_t owner) {
  if (Status s = CheckTrustedParents(tmp_base, owner, kTmpBase); !s.ok())
    return s;
  return CheckTrustedDir(tmp_base, owner, kTmpBase);
}

Status CheckNodeDirItself(const std::string& dir, uid_t owner) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT)
      return Status::Unavailable(fmt::format("{} does not exist", dir));
    return Status::IoError(fmt::format("cannot read {}: {}", dir, Errno(err)));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != owner || (st.st_mode & 07777) != 0700) {
    return Status::PermissionDenied(fmt::format(
        "spank_jail node directory {} is not a directory owned by uid {} with mode 0700 (uid {}, "
        "mode {:04o}): refusing it, since jobs trust the files in it (remove it: rm -rf "
        "--one-file-system {})",
        dir, owner, st.st_uid, st.st_mode & 07777, dir));
  }
  return Status::Ok();
}

// Never a symlink, never another mount: the walk stays on the tree it started in.
constexpr uint64_t kStayHere = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
// Open directory streams kept while walking down; deeper than that, the
// shallowest are closed and reopened through ".." on the way back up.
constexpr size_t kMaxOpenLevels = 64;

// The iterative walk behind RemoveTree: a stack of levels, the deepest
// kMaxOpenLevels of them with an open directory stream.
class TreeRemover {
 public:
  explicit TreeRemover(std::string where) : where_(std::move(where)) {}
  TreeRemover(const TreeRemover&) = delete;
  TreeRemover& operator=(const TreeRemover&) = delete;
  ~TreeRemover() {
    for (Level& l : levels_) {
      if (l.dir != nullptr)
        ::closedir(l.dir);
    }
  }
  Status Run(int parent_fd, const std::string& name);

 private:
  struct Level {
    DIR* dir = nullptr;  // nullptr once closed to bound the open descriptors
    std::string name;    // its name in the level above
    dev_t dev = 0;
    ino_t ino = 0;
  };
  Status Push(int fd, const std::string& name);
  void Entry(const char* name);
  Status Climb();
  std::string PathOf(std::string_view name) const {
    return levels_.size() <= 1
               ? fmt::format("{}/{}", where_, name)
               : fmt::format("{}/<{} levels down>/{}", where_, levels_.size() - 1, name);
  }
  void Fail(Status s) {
    if (result_.ok())
      result_ = std::move(s);
  }

  std::string where_;
  int top_parent_ = -1;
  std::vector<Level> levels_;
  size_t lowest_open_ = 0;
  std::set<std::pair<dev_t, ino_t>> kept_;  // directories that cannot go: not entered again
  Status result_;
};

Status TreeRemover::Push(int fd, const std::string& name) {
  struct stat st {};
  DIR* dir = ::fstat(fd, &st) == 0 ? ::fdopendir(fd) : nullptr;
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return Status::IoError(fmt::format("cannot list {}: {}", PathOf(name), Errno(err)));
  }
  levels_.push_back(Level{dir, name, st.st_dev, st.st_ino});
  if (levels_.size() - lowest_open_ > kMaxOpenLevels) {
    ::closedir(levels_[lowest_open_].dir);
    levels_[lowest_open_].dir = nullptr;
    ++lowest_open_;
  }
  return Status::Ok();
}

// One entry of the deepest directory: removed, or (a directory) entered.
void TreeRemover::Entry(const char* name) {
  int dfd = ::dirfd(levels_.back().dir);
  struct stat st {};
  if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT)
      Fail(Status::IoError(fmt::format("cannot stat {}: {}", PathOf(name), Errno(errno))));
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
      Fail(Status::IoError(fmt::format("cannot remove {}: {}", PathOf(name), Errno(errno))));
    return;
  }
  if (kept_.count({st.st_dev, st.st_ino}) != 0)
    return;
  int fd = OpenAt2(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                   kStayHere | RESOLVE_BENEATH);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return;
    kept_.insert({st.st_dev, st.st_ino});
    Fail(err == EXDEV
             ? Status::IoError(fmt::format("{} is a mount point: not removing it", PathOf(name)))
             : Status::IoError(fmt::format("cannot open {}: {}", PathOf(name), Errno(err))));
    return;
  }
  if (Status s = Push(fd, name); !s.ok()) {
    kept_.insert({st.st_dev, st.st_ino});
    Fail(s);
  }
}

// The deepest directory has been read to its end: remove it from the level
// above, reopening that one through ".." if its stream was closed.
Status TreeRemover::Climb() {
  Level child = levels_.back();
  levels_.pop_back();
  if (levels_.empty()) {
    ::closedir(child.dir);
    if (::unlinkat(top_parent_, child.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      Fail(Status::IoError(fmt::format("cannot remove {}: {}", where_, Errno(errno))));
    return Status::Ok();
  }
  Level& parent = levels_.back();
  if (parent.dir == nullptr) {
    int fd = OpenAt2(::dirfd(child.dir), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC, kStayHere);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_dev != parent.dev || st.st_ino != parent.ino) {
      if (fd >= 0)
        ::close(fd);
      ::closedir(child.dir);
      return Status::IoError(fmt::format(
          "{} was moved while it was being removed: stopped; remove what is left by hand",
          PathOf(child.name)));
    }
    parent.dir = ::fdopendir(fd);  // a fresh stream: its listing starts again
    if (parent.dir == nullptr) {
      ::close(fd);
      ::closedir(child.dir);
      return Status::IoError(fmt::format("cannot list {}: {}", PathOf(""), Errno(errno)));
    }
    lowest_open_ = levels_.size() - 1;
  }
  ::closedir(child.dir);
  std::string name = child.name;
  if (::unlinkat(::dirfd(parent.dir), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    kept_.insert({child.dev, child.ino});
    Fail(Status::IoError(fmt::format("cannot remove {}: {}", PathOf(name), Errno(errno))));
  }
  return Status::Ok();
}

Status TreeRemover::Run(int parent_fd, const std::string& name) {
  top_parent_ = parent_fd;
  int fd = OpenAt2(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                   kStayHere | RESOLVE_BENEATH);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return Status::Ok();
    return Status::IoError(fmt::format("cannot open {}: {}", where_, Errno(err)));
  }
  if (Status s = Push(fd, name); !s.ok())
    return s;
  while (!levels_.empty()) {
    errno = 0;
    struct dirent* e = ::readdir(levels_.back().dir);
    if (e != nullptr) {
      std::string_view n = e->d_name;
      if (n != "." && n != "..")
        Entry(e->d_name);
      continue;
    }
    if (errno != 0)
      Fail(Status::IoError(fmt::format("cannot list {}: {}", PathOf(""), Errno(errno))));
    if (Status s = Climb(); !s.ok()) {
      Fail(s);
      break;
    }
  }
  return result_;
}

}  // namespace

std::string JobTmpPath(const std::string& tmp_base, const std::string& node, uint32_t job_id) {
  return fmt::format("{}/{}/job{}", tmp_base, node, job_id);
}

std::string JobVarTmpPath(const std::string& job_tmp) {
  return job_tmp + ".var-tmp";
}

Status CheckNodeDir(const std::string& tmp_base, const std::string& node, uid_t owner) {
  if (Status s = CheckNodeName(node); !s.ok())
    return s;
  if (Status s = CheckTmpBase(tmp_base, owner); !s.ok()) {
    // No tmp_base yet: no job on this node has started a namespace.
    return s.code() == Status::Code::kNotFound ? Status::Unavailable(s.message()) : s;
  }
  return CheckNodeDirItself(tmp_base + "/" + node, owner);
}

Status CreateNodeDir(const std::string& tmp_base, const std::string& node, uid_t owner) {
  if (Status s = CheckNodeName(node); !s.ok())
    return s;
  // Parents of tmp_base (e.g. /var/lib/k8sbridge) may be missing on a fresh node.
  for (size_t pos = 1; (pos = tmp_base.find('/', pos)) != std::string::npos; ++pos) {
    std::string partial = tmp_base.substr(0, pos);
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError(fmt::format("cannot create {}: {}", partial, Errno(errno)));
    }
  }
  if (::mkdir(tmp_base.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::IoError(fmt::format("cannot create {}: {}", tmp_base, Errno(errno)));
  if (Status s = CheckTmpBase(tmp_base, owner); !s.ok())
    return s;
  std::string dir = tmp_base + "/" + node;
  if (Status s = MakeDir(dir, 0700, owner); !s.ok())
    return s;
  return CheckNodeDirItself(dir, owner);
}

Status CreateJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id,
                    uid_t owner) {
  if (Status s = CreateNodeDir(tmp_base, node, owner); !s.ok())
    return s;
  std::string job_tmp = JobTmpPath(tmp_base, node, job_id);
  if (Status s = MakeDir(job_tmp, 01777, owner); !s.ok())
    return s;
  return MakeDir(JobVarTmpPath(job_tmp), 01777, owner);
}

Status RemoveJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id,
                    uid_t owner) {
  if (Status s = CheckNodeDir(tmp_base, node, owner); !s.ok())
    return s.code() == Status::Code::kUnavailable ? Status::Ok() : s;
  std::string dir = tmp_base + "/" + node;
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid())
    return Status::IoError(fmt::format("cannot open {}: {}", dir, Errno(errno)));
  std::string job_tmp = JobTmpPath(tmp_base, node, job_id);
  std::string var_tmp = JobVarTmpPath(job_tmp);
  Status result = RemoveTree(dir_fd.get(), job_tmp.substr(dir.size() + 1), job_tmp);
  Status var = RemoveTree(dir_fd.get(), var_tmp.substr(dir.size() + 1), var_tmp);
  return result.ok() ? var : result;
}

Status RemoveTree(int parent_fd, const std::string& name, const std::string& where) {
  return TreeRemover(where).Run(parent_fd, name);
}

}  // namespace k8sbridge::jail
