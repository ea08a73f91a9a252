#include "k8sbridge/jail/prepare.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "k8sbridge/file.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/jail/writable_layer.h"
#include "k8sbridge/text.h"

namespace k8sbridge::jail {
namespace {

using text::Contains;

constexpr std::string_view kUsage = kPrepareUsage.substr(0, kPrepareUsage.find('\n'));

std::string Unescape(std::string_view s) {
  // mountinfo escapes space, tab, newline and backslash as \ooo (octal).
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

Result<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    int err = errno;
    if (err == ENOENT)
      return Status::NotFound(fmt::format("{} does not exist", path));
    return Status::IoError(fmt::format("cannot resolve {}: {}", path, std::strerror(err)));
  }
  return std::string(buf);
}

// An exclusive flock on <jail>/.k8sbridge-prepare.lock, polled until a deadline.
// A jail mounted read-only (as workers mount it) needs none: nothing can be
// created in it, so there is nothing to race for.
class JailLock {
 public:
  static Result<JailLock> Take(const std::string& jail, std::chrono::milliseconds timeout) {
    std::string path = jail + "/.k8sbridge-prepare.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EROFS)
      return JailLock(-1);
    if (fd < 0) {
      return Status::IoError(fmt::format("cannot open lock {}: {}", path, std::strerror(errno)));
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ::close(fd);
        return Status::IoError(fmt::format("cannot lock {}: {}", path, std::strerror(err)));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::close(fd);
        return Status::Timeout(fmt::format(
            "another k8sbridge-jail-prepare held {} for over {} ms: is one stuck on a hung jail?",
            path, timeout.count()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return JailLock(fd);
  }
  JailLock(JailLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  JailLock(const JailLock&) = delete;
  ~JailLock() {
    if (fd_ >= 0)
      ::close(fd_);  // releases the flock
  }

 private:
  explicit JailLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

Result<std::vector<std::string>> MountPoints() {
  auto text = ReadFile("/proc/self/mountinfo");
  if (!text.ok())
    return text.status();
  std::vector<std::string> points;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    if (fields >> id >> parent >> devno >> root >> point)
      points.push_back(Unescape(point));
  }
  return points;
}

namespace {

// The entries of one --bind into `c`; errors name the argument.
Status AddBinds(std::string_view text, PrepareConfig& c) {
  auto binds = ParseBinds(text);
  if (!binds.ok()) {
    return Status::InvalidArgument(
        fmt::format("k8sbridge-jail-prepare --bind {}: {}", text, binds.status().message()));
  }
  c.binds.insert(c.binds.end(), binds->begin(), binds->end());
  return Status::Ok();
}

}  // namespace

Result<PrepareConfig> ParsePrepareArgs(const std::vector<std::string>& args, bool* undo) {
  PrepareConfig c;
  *undo = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string_view name) -> Result<std::string> {
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument(fmt::format("{} needs a value\n{}", name, kUsage));
      }
      return args[++i];
    };
    auto path = [&](std::string_view name) -> Result<std::string> {
      auto v = value(name);
      if (!v.ok())
        return v.status();
      return NormalizeAbsolute(*v, fmt::format("k8sbridge-jail-prepare {}", name));
    };
    if (a == "--jail") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.jail = *v;
    } else if (a == "--slurm-prefix") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.slurm_prefix = *v;
    } else if (a == "--slurm-conf-dir") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.slurm_conf_dir = *v;
    } else if (a == "--munge-dir") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.munge_dir = *v;
    } else if (a == "--gpu-lib") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.gpu_libs.push_back(*v);
    } else if (a == "--bind") {
      auto v = value(a);
      if (!v.ok())
        return v.status();
      if (Status s = AddBinds(*v, c); !s.ok())
        return s;
    } else if (a == "--no-standard") {
      c.standard = false;
    } else if (a == "--state-file") {
      auto v = path(a);
      if (!v.ok())
        return v.status();
      c.state_file = *v;
    } else if (a == "--lock-timeout") {
      auto v = value(a);
      if (!v.ok())
        return v.status();
      auto d = ParseDuration(*v);
      if (!d.ok()) {
        return Status::InvalidArgument(
            fmt::format("--lock-timeout {}: expected seconds such as 60", *v));
      }
      c.lock_timeout = *d;
    } else if (a == "--undo") {
      *undo = true;
    } else {
      return Status::InvalidArgument(fmt::format("unknown argument '{}'\n{}", a, kUsage));
    }
  }
  if (c.jail.empty() || c.jail == "/") {
    return Status::InvalidArgument(fmt::format("--jail DIR is required (not /)\n{}", kUsage));
  }
  if (c.state_file.empty())
    c.state_file = DefaultStateFile(c.jail);
  return c;
}

std::string DefaultStateFile(const std::string& jail) {
  std::string name = jail;
  std::replace(name.begin(), name.end(), '/', '_');
  return "/run/k8sbridge/jail-prepare/" + name;
}

std::vector<PrepareMount> BuildPreparePlan(const PrepareConfig& c) {
  std::vector<PrepareMount> plan;
  auto same = [](const std::string& p, bool ro = false) { return Bind{p, p, ro}; };
  if (c.standard) {
    plan.push_back({same("/dev"), true, false});
    plan.push_back({same("/sys"), true, false});
    plan.push_back({same("/etc/hosts"), false, true});
    plan.push_back({same("/etc/resolv.conf"), false, true});
  }
  if (!c.munge_dir.empty())
    plan.push_back({same(c.munge_dir), false, true});
  if (!c.slurm_prefix.empty())
    plan.push_back({same(c.slurm_prefix, true), false, false});
  if (!c.slurm_conf_dir.empty())
    plan.push_back({same(c.slurm_conf_dir, true), false, true});
  for (const std::string& lib : c.gpu_libs)
    plan.push_back({same(lib, true), false, false, true});
  for (const Bind& b : c.binds)
    plan.push_back({b, true, false});
  return plan;
}

namespace {

// The mount points a state file records, one a line.
std::vector<std::string> RecordedMounts(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty())
      lines.push_back(line);
  }
  return lines;
}

// The deepest directory on the way to `path` (absolute inside the jail) that
// exists, resolved beneath the jail root.
Result<UniqueFd> NearestExistingBeneath(int jail_fd, std::string path, const std::string& jail) {
  while (true) {
    size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    auto dir = OpenBeneath(jail_fd, path, jail);
    if (dir.ok() || dir.status().code() != Status::Code::kNotFound || path == "/")
      return dir;
  }
}

// Makes room for a GPU driver file's mount point `target` that the jail lacks:
// when its nearest jail directory is read-only, that directory gets a per-pod
// writable layer, recorded before the file's bind so --undo removes the bind
// first. A layer an earlier run of this pod recorded is reused.
Status MakeRoomForDriverFile(const PrepareConfig& c, const std::string& target, int jail_fd,
                             WritableLayers& layers, std::vector<std::string>& recorded,
                             Logger& log) {
  auto existing = OpenBeneath(jail_fd, target, c.jail);
  if (existing.ok() || existing.status().code() != Status::Code::kNotFound)
    return Status::Ok();  // MakePathBeneath binds onto it, or reports what is wrong
  auto dir = NearestExistingBeneath(jail_fd, target, c.jail);
  if (!dir.ok())
    return dir.status().WithContext("bind target");
  struct statvfs fs {};
  if (::fstatvfs(dir->get(), &fs) != 0) {
    return Status::IoError(fmt::format("cannot statvfs the directory of {} in jail {}: {}", target,
                                       c.jail, std::strerror(errno)));
  }
  if (!(fs.f_flag & ST_RDONLY))
    return Status::Ok();
  auto dir_real = RealPath(dir->ProcPath());
  if (!dir_real.ok())
    return dir_real.status();
  auto points = MountPoints();
  if (!points.ok())
    return points.status();
  if (Contains(*points, *dir_real) && Contains(recorded, *dir_real))
    return Status::Ok();
  for (const std::string& point : *points) {
    if (point == *dir_real || point.starts_with(*dir_real + "/")) {
      return Status::InvalidArgument(fmt::format(
          "cannot lay a writable layer over jail directory {} for {}: {} is mounted at or "
          "beneath it, and the layer would cover it; create the directory of {} in the jail "
          "once, from a pod that mounts it writable (such as the populate job)",
          *dir_real, target, point, target));
    }
  }
  if (Status s = layers.Cover(dir->get(), *dir_real, log); !s.ok())
    return s;
  recorded.push_back(*dir_real);
  return Status::Ok();
}

// Binds one planned mount below the jail, adding its target to `recorded`;
// skips an optional source this host lacks and a target an earlier run bound.
Status BindPlannedMount(const PrepareConfig& c, const PrepareMount& m, int jail_fd,
                        WritableLayers& layers, std::vector<std::string>& recorded, Logger& log) {
  auto source = RealPath(m.bind.source);
  if (!source.ok()) {
    if (m.optional && source.status().code() == Status::Code::kNotFound) {
      log.Info("skipping {}: not on this host", m.bind.source);
      return Status::Ok();
    }
    return source.status().WithContext("bind source");
  }
  struct stat st {};
  if (::stat(source->c_str(), &st) != 0) {
    return Status::IoError(fmt::format("cannot stat {}: {}", *source, std::strerror(errno)));
  }
  if (m.layer_when_read_only) {
    if (Status s = MakeRoomForDriverFile(c, m.bind.target, jail_fd, layers, recorded, log); !s.ok())
      return s;
  }
  auto target = MakePathBeneath(jail_fd, m.bind.target, !S_ISDIR(st.st_mode), c.jail);
  if (!target.ok())
    return target.status().WithContext("bind target");
  // Where the target really is on the host (below the jail, by construction).
  auto target_real = RealPath(target->ProcPath());
  if (!target_real.ok())
    return target_real.status();
  auto points = MountPoints();
  if (!points.ok())
    return points.status();
  if (Contains(*points, *target_real)) {
    // Reused only when this pod's own earlier run made it (its state file, in
    // the pod's /run, lists it). Any other mount there is somebody else's: with
    // Bidirectional propagation another pod's binds show up here, and its munge
    // socket or /dev are not this pod's.
    if (!Contains(recorded, *target_real)) {
      return Status::InvalidArgument(fmt::format(
          "{} is already a mount point, and not one this pod's k8sbridge-jail-prepare "
          "made (its state file {} does not list it): refusing to use it. Unmount it; if "
          "it came from another pod, drop mountPropagation: Bidirectional from the jail's "
          "volume mount",
          *target_real, c.state_file));
    }
    log.Info("{} is already mounted by an earlier run: leaving it", *target_real);
    return Status::Ok();
  }
  // Mounted from a descriptor of the resolved source, opened without
  // following any symlink: nothing can be swapped in after realpath.
  auto source_fd = OpenHostPath(*source, "bind source");
  if (!source_fd.ok())
    return source_fd.status();
  if (Status s = BindTree(source_fd->get(), target->get(), m.recursive, m.bind.read_only);
      !s.ok()) {
    return s.WithContext(fmt::format("bind {} onto {}{}", *source, *target_real,
                                     m.bind.read_only ? " (read-only)" : ""));
  }
  recorded.push_back(*target_real);
  log.Info("bound {} onto {}{}", *source, *target_real, m.bind.read_only ? " (read-only)" : "");
  return Status::Ok();
}

Status WriteStateFile(const std::string& state_file, const std::vector<std::string>& recorded) {
  std::string record;
  for (const std::string& r : recorded)
    record += r + "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(state_file).parent_path(), ec);
  if (ec) {
    return Status::IoError(
        fmt::format("cannot create the directory of {}: {}", state_file, ec.message()));
  }
  return WriteFileAtomic(state_file, record, 0644);
}

}  // namespace

Status PrepareJail(const PrepareConfig& c, Logger& log) {
  if (Status s = CheckJailRoot(c.jail, 0); !s.ok())
    return s;
  auto jail_real = RealPath(c.jail);
  if (!jail_real.ok())
    return jail_real.status();
  auto lock = JailLock::Take(*jail_real, c.lock_timeout);
  if (!lock.ok())
    return lock.status();
  auto jail_fd = OpenJailRoot(*jail_real);
  if (!jail_fd.ok())
    return jail_fd.status();

  std::vector<std::string> recorded;
  if (auto old = ReadFile(c.state_file); old.ok())
    recorded = RecordedMounts(*old);
  WritableLayers layers(OverlayStagingDir(c.state_file));
  for (const PrepareMount& m : BuildPreparePlan(c)) {
    if (Status s = BindPlannedMount(c, m, jail_fd->get(), layers, recorded, log); !s.ok())
      return s;
  }
  if (Status s = layers.Finish(); !s.ok())
    return s;
  return WriteStateFile(c.state_file, recorded);
}

Status UndoPrepare(const PrepareConfig& c, Logger& log) {
  auto text = ReadFile(c.state_file);
  if (!text.ok()) {
    if (text.status().code() == Status::Code::kNotFound)
      return Status::Ok();
    return text.status();
  }
  std::vector<std::string> targets = RecordedMounts(*text);
  Status result;
  for (auto it = targets.rbegin(); it != targets.rend(); ++it) {
    // UMOUNT_NOFOLLOW: a recorded path that has become a symlink since (the
    // jail is shared) must not redirect the unmount elsewhere.
    if (::umount2(it->c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL &&
        errno != ENOENT) {
      result = Status::IoError(fmt::format("unmount {}: {}", *it, std::strerror(errno)));
      log.Error("{}", result.message());
    } else {
      log.Info("unmounted {}", *it);
    }
  }
  ::unlink(c.state_file.c_str());
  return result;
}

}  // namespace k8sbridge::jail
