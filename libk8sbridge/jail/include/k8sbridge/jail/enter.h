// Building the jail's view: per task in slurm_spank_task_init_privileged
// (namespace=task, or a job without a job namespace), or once per job by the
// job namespace holder (job_ns.h).
//
// The task (a child of slurmstepd, still root) gets its own mount namespace in
// which / is a slave of the host's, so no mount it makes can ever appear on the
// host, and every one of them disappears with the task's last process. In that
// namespace the jail is bound onto itself, the per-job /tmp and /var/tmp, a
// fresh tmpfs on /dev/shm and the administrator's binds are mounted (targets resolved beneath the
// jail, see paths.h), the jail becomes the root with pivot_root, the host's root is detached, and a
// fresh /proc is mounted.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/jail/options.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

struct TaskMount {
  enum class Kind {
    kBind,   // `source` (a host path, opened without following any symlink) onto `target`
    kTmpfs,  // a fresh tmpfs (mode 1777) on `target`: the job's own /dev/shm
  };
  std::string source;      // host path (kBind)
  std::string target;      // absolute path inside the jail
  bool read_only = false;  // and every submount below it too
  // The target lies in the job's private /tmp or /var/tmp, which the plugin
  // owns: missing directories are created there. Elsewhere the jail must
  // already have it.
  bool create_target = false;
  Kind kind = Kind::kBind;
  // A jail without the target (no /var/tmp, no /dev/shm) skips the mount.
  bool optional_target = false;
  friend bool operator==(const TaskMount&, const TaskMount&) = default;
};

struct TaskPlan {
  std::string jail;
  std::vector<TaskMount> mounts;  // in order
  bool fresh_proc = true;
};

// Pure: what EnterJail will do for `options` and the job's private tmp directory
// (`job_tmp` empty when tmp=jail). With a private /tmp the job also gets its own
// /var/tmp (JobVarTmpPath) and /dev/shm (a tmpfs of its namespace's own).
TaskPlan BuildTaskPlan(const Options& options, const std::string& job_tmp);

// Carries out `plan` in the calling process (root, CAP_SYS_ADMIN). On return the
// process's root is the jail. On failure the process may be half-way (in its
// own mount namespace): the caller must fail the task, never run it.
Status EnterJail(const TaskPlan& plan);

}  // namespace k8sbridge::jail
