#include "k8sbridge/jail/enter.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "k8sbridge/jail/job_tmp.h"
#include "k8sbridge/jail/paths.h"

namespace k8sbridge::jail {
namespace {

Status SysError(std::string_view what, int err) {
  return Status::IoError(fmt::format("{}: {}", what, std::strerror(err)));
}

bool Under(const std::string& target, std::string_view dir) {
  return target == dir || (target.starts_with(dir) && target[dir.size()] == '/');
}

// The target's descriptor: created in the job's own /tmp or /var/tmp, found
// (beneath the jail, never through a symlink out of it) anywhere else.
Result<UniqueFd> OpenTarget(int jail_fd, const TaskMount& m, bool is_dir, const std::string& jail) {
  auto target = m.create_target ? MakePathBeneath(jail_fd, m.target, !is_dir, jail)
                                : OpenBeneath(jail_fd, m.target, jail);
  if (!target.ok() && target.status().code() == Status::Code::kNotFound && !m.optional_target) {
    return Status::NotFound(
        fmt::format("bind target {} does not exist in jail {}: create it there (mkdir {}{}) or let "
                    "k8sbridge-jail-prepare bind it",
                    m.target, jail, jail, m.target));
  }
  return target;
}

Status MountOne(int jail_fd, const TaskMount& m, const std::string& jail) {
  if (m.optional_target) {
    // Looked up first: a jail without it needs no source either.
    auto there = OpenBeneath(jail_fd, m.target, jail);
    if (!there.ok())
      return there.status().code() == Status::Code::kNotFound ? Status::Ok() : there.status();
  }
  UniqueFd source;
  bool is_dir = true;
  if (m.kind == TaskMount::Kind::kBind) {
    auto opened = OpenHostPath(m.source, "bind source");
    if (!opened.ok())
      return opened.status().WithContext(fmt::format("bind for {} in jail {}", m.target, jail));
    struct stat st {};
    if (::fstat(opened->get(), &st) != 0)
      return SysError(fmt::format("stat bind source {}", m.source), errno);
    is_dir = S_ISDIR(st.st_mode);
    source = std::move(*opened);
  }
  auto target = OpenTarget(jail_fd, m, is_dir, jail);
  if (!target.ok())
    return target.status();
  if (m.kind == TaskMount::Kind::kTmpfs) {
    if (::mount("tmpfs", target->ProcPath().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") !=
        0) {
      return SysError(fmt::format("mount a fresh tmpfs on {} in jail {}", m.target, jail), errno);
    }
    return Status::Ok();
  }
  if (Status s = BindTree(source.get(), target->get(), true, m.read_only); !s.ok()) {
    return s.WithContext(fmt::format("bind {} onto {}{} in jail {}", m.source, m.target,
                                     m.read_only ? " (read-only)" : "", jail));
  }
  return Status::Ok();
}

}  // namespace

TaskPlan BuildTaskPlan(const Options& options, const std::string& job_tmp) {
  TaskPlan plan;
  plan.jail = options.jail;
  bool private_tmp = options.tmp == TmpMode::kPrivate && !job_tmp.empty();
  if (private_tmp) {
    using Kind = TaskMount::Kind;
    plan.mounts.push_back(TaskMount{job_tmp, "/tmp", false, false});
    plan.mounts.push_back(
        TaskMount{JobVarTmpPath(job_tmp), "/var/tmp", false, false, Kind::kBind, true});
    plan.mounts.push_back(TaskMount{"", "/dev/shm", false, false, Kind::kTmpfs, true});
  }
  for (const Bind& b : options.binds) {
    bool in_private_tmp = private_tmp && b.target != "/tmp" && b.target != "/var/tmp" &&
                          (Under(b.target, "/tmp") || Under(b.target, "/var/tmp"));
    plan.mounts.push_back(TaskMount{b.source, b.target, b.read_only, in_private_tmp});
  }
  return plan;
}

Status EnterJail(const TaskPlan& plan) {
  if (::unshare(CLONE_NEWNS) != 0)
    return SysError("unshare(CLONE_NEWNS)", errno);
  // From here on nothing propagates back to the host's mount namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    return SysError("make / a recursive slave", errno);
  }
  // pivot_root needs the new root to be a mount point; recursive, so the mounts
  // the pod-level preparation made inside the jail (/dev, /sys, ...) come along.
  if (::mount(plan.jail.c_str(), plan.jail.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return SysError(fmt::format("bind jail {} onto itself", plan.jail), errno);
  }
  // Opened after the self-bind, so lookups from it see the new mount and the
  // mounts made below.
  auto jail_fd = OpenJailRoot(plan.jail);
  if (!jail_fd.ok())
    return jail_fd.status();
  for (const TaskMount& m : plan.mounts) {
    if (Status s = MountOne(jail_fd->get(), m, plan.jail); !s.ok())
      return s;
  }
  if (::fchdir(jail_fd->get()) != 0) {
    // O_PATH descriptors allow fchdir.
    return SysError(fmt::format("chdir into jail {}", plan.jail), errno);
  }
  if (::syscall(SYS_pivot_root, ".", ".") != 0) {
    return SysError(fmt::format("pivot_root into jail {}", plan.jail), errno);
  }
  // The old root is now stacked on top of "."; detach it so the task cannot reach
  // the host's file system.
  if (::umount2(".", MNT_DETACH) != 0)
    return SysError("detach the host root", errno);
  if (::chdir("/") != 0)
    return SysError("chdir / in the jail", errno);
  if (plan.fresh_proc) {
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      return SysError(fmt::format("mount a fresh /proc in jail {}", plan.jail), errno);
    }
  }
  return Status::Ok();
}

}  // namespace k8sbridge::jail
