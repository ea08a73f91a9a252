#include "k8sbridge/jail/enter.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
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
    std::string data = m.tmpfs_size.empty() ? "mode=1777" : "mode=1777,size=" + m.tmpfs_size;
    if (::mount("tmpfs", target->ProcPath().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) !=
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

// The jail's own directory `dir` bound onto itself, so it stays writable when
// the jail's root is made read-only (a jail without it skips it).
Status KeepWritable(int jail_fd, const std::string& dir, const std::string& jail) {
  auto there = OpenBeneath(jail_fd, dir, jail);
  if (!there.ok())
    return there.status().code() == Status::Code::kNotFound ? Status::Ok() : there.status();
  if (Status s = BindTree(there->get(), there->get(), true, false); !s.ok())
    return s.WithContext(fmt::format("keep {} writable in jail {}", dir, jail));
  return Status::Ok();
}

// mount_setattr on the mount at `fd` (and every mount below it when `recursive`).
Status SetMountAttr(int fd, uint64_t attr_set, bool recursive, std::string_view what) {
  struct mount_attr attr {};
  attr.attr_set = attr_set;
  unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  if (::syscall(SYS_mount_setattr, fd, "", flags, &attr, sizeof attr) != 0)
    return SysError(what, errno);
  return Status::Ok();
}

// Everything below the jail's root is mounted: every mount nosuid (the jail's
// own files and every bind, so no setuid program in them runs as its owner),
// and the jail's own root read-only (the jail is every node's; the job's /tmp,
// its binds and /dev are mounts of their own and keep their flags).
Status SealView(int jail_fd, const std::string& jail) {
  if (Status s = SetMountAttr(jail_fd, MOUNT_ATTR_NOSUID, true, "make the jail's mounts nosuid");
      !s.ok()) {
    return s.WithContext(fmt::format("jail {}", jail));
  }
  if (Status s = SetMountAttr(jail_fd, MOUNT_ATTR_RDONLY, false, "make the jail read-only");
      !s.ok()) {
    return s.WithContext(fmt::format("jail {}", jail));
  }
  return Status::Ok();
}

Status MountAll(int jail_fd, const TaskPlan& plan) {
  for (const std::string& dir : plan.writable) {
    if (Status s = KeepWritable(jail_fd, dir, plan.jail); !s.ok())
      return s;
  }
  for (const auto* list : {&plan.mounts, &plan.system_mounts}) {
    for (const TaskMount& m : *list) {
      if (Status s = MountOne(jail_fd, m, plan.jail); !s.ok())
        return s;
    }
  }
  return SealView(jail_fd, plan.jail);
}

std::string_view Dirname(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? std::string_view("/") : path.substr(0, slash);
}

}  // namespace

SlurmConfView SlurmConfInJail(const Options& options, const std::string& slurm_conf) {
  if (slurm_conf.empty() || slurm_conf.front() != '/' || slurm_conf.back() == '/')
    return {};
  std::string dir(Dirname(slurm_conf));
  if (dir == "/etc/slurm")
    return {};
  for (const Bind& b : options.binds) {
    if (Under(dir, b.source))
      return {"", b.target + slurm_conf.substr(b.source.size())};
  }
  return {dir, "/etc/slurm" + slurm_conf.substr(dir.size())};
}

TaskPlan BuildTaskPlan(const Options& options, const std::string& job_tmp,
                       const std::string& slurm_conf, ViewFor view) {
  using Kind = TaskMount::Kind;
  TaskPlan plan;
  plan.jail = options.jail;
  bool private_tmp = options.tmp == TmpMode::kPrivate && !job_tmp.empty();
  if (private_tmp && view == ViewFor::kJobNamespace) {
    plan.mounts.push_back(
        TaskMount{"", "/tmp", false, false, Kind::kTmpfs, false, options.tmp_size});
    plan.mounts.push_back(
        TaskMount{"", "/var/tmp", false, false, Kind::kTmpfs, true, options.tmp_size});
  } else if (private_tmp) {
    plan.mounts.push_back(TaskMount{job_tmp, "/tmp", false, false});
    plan.mounts.push_back(
        TaskMount{JobVarTmpPath(job_tmp), "/var/tmp", false, false, Kind::kBind, true});
  } else {
    plan.writable = {"/tmp", "/var/tmp"};
  }
  if (private_tmp)
    plan.mounts.push_back(TaskMount{"", "/dev/shm", false, false, Kind::kTmpfs, true});
  for (const Bind& b : options.binds) {
    bool in_private_tmp = private_tmp && b.target != "/tmp" && b.target != "/var/tmp" &&
                          (Under(b.target, "/tmp") || Under(b.target, "/var/tmp"));
    plan.mounts.push_back(TaskMount{b.source, b.target, b.read_only, in_private_tmp});
  }
  if (SlurmConfView conf = SlurmConfInJail(options, slurm_conf); !conf.host_dir.empty())
    plan.system_mounts.push_back(TaskMount{conf.host_dir, "/etc/slurm", true, false});
  plan.system_mounts.push_back(
      TaskMount{"/dev/null", "/dev/termination-log", true, false, Kind::kBind, true});
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
  if (Status s = MountAll(jail_fd->get(), plan); !s.ok())
    return s;
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
  // hidepid=invisible: a user's task sees only its own processes, not other
  // jobs' command lines and environments (a procfs of its own since Linux 5.8,
  // which is also the first that takes the word, so an older kernel refuses it
  // instead of applying it to the pod's /proc).
  if (plan.fresh_proc && ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                 "hidepid=invisible") != 0) {
    return SysError(fmt::format("mount a fresh /proc (hidepid=invisible) in jail {}", plan.jail),
                    errno);
  }
  return Status::Ok();
}

Status SealTask(const std::string& task_conf) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return SysError("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  if (!task_conf.empty() && ::setenv("SLURM_CONF", task_conf.c_str(), 1) != 0)
    return SysError(fmt::format("set SLURM_CONF={}", task_conf), errno);
  return Status::Ok();
}

}  // namespace k8sbridge::jail
