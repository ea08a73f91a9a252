#include "k8sbridge/jail/enter.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "k8sbridge/jail/paths.h"

namespace k8sbridge::jail {
namespace {

Status SysError(std::string_view what, int err) {
  return Status::IoError(fmt::format("{}: {}", what, std::strerror(err)));
}

bool UnderTmp(const std::string& target) {
  return target == "/tmp" || target.starts_with("/tmp/");
}

Status BindOne(int jail_fd, const TaskMount& m, const std::string& jail) {
  struct stat src {};
  if (::stat(m.source.c_str(), &src) != 0) {
    return SysError(fmt::format("bind source {} (for {} in jail {})", m.source, m.target, jail),
                    errno);
  }
  auto target = m.create_target ? MakePathBeneath(jail_fd, m.target, !S_ISDIR(src.st_mode), jail)
                                : OpenBeneath(jail_fd, m.target, jail);
  if (!target.ok()) {
    if (target.status().code() == Status::Code::kNotFound) {
      return Status::NotFound(fmt::format(
          "bind target {} does not exist in jail {}: create it there (mkdir {}{}) or let "
          "k8sbridge-jail-prepare bind it",
          m.target, jail, jail, m.target));
    }
    return target.status();
  }
  std::string at = target->ProcPath();
  if (::mount(m.source.c_str(), at.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return SysError(fmt::format("bind {} onto {} in jail {}", m.source, m.target, jail), errno);
  }
  if (m.read_only) {
    // The descriptor names the covered directory; reopen to reach the new mount.
    auto top = OpenBeneath(jail_fd, m.target, jail);
    if (!top.ok())
      return top.status();
    std::string top_at = top->ProcPath();
    if (::mount(nullptr, top_at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC,
                nullptr) != 0) {
      return SysError(fmt::format("make {} read-only in jail {}", m.target, jail), errno);
    }
  }
  return Status::Ok();
}

}  // namespace

TaskPlan BuildTaskPlan(const Options& options, const std::string& job_tmp) {
  TaskPlan plan;
  plan.jail = options.jail;
  bool private_tmp = options.tmp == TmpMode::kPrivate && !job_tmp.empty();
  if (private_tmp)
    plan.mounts.push_back(TaskMount{job_tmp, "/tmp", false, false});
  for (const Bind& b : options.binds) {
    bool in_private_tmp = private_tmp && UnderTmp(b.target) && b.target != "/tmp";
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
    if (Status s = BindOne(jail_fd->get(), m, plan.jail); !s.ok())
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
