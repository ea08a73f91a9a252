// Building the jail's view: per task in slurm_spank_task_init_privileged
// (namespace=task, or a job without a job namespace), or once per job by the
// job namespace holder (job_ns.h).
//
// The task (a child of slurmstepd, still root) gets its own mount namespace in
// which / is a slave of the host's, so no mount it makes can ever appear on the
// host, and every one of them disappears with the task's last process. In that
// namespace the jail is bound onto itself, the per-job /tmp and /var/tmp, a
// fresh tmpfs on /dev/shm and the administrator's binds are mounted (targets resolved beneath the
// jail, see paths.h), then the step's Slurm configuration and /dev/null over
// /dev/termination-log. Every mount of the view is made nosuid and the jail's own
// root read-only, the jail becomes the root with pivot_root, the host's root is
// detached, and a fresh /proc with hidepid=invisible is mounted.
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
  std::string tmpfs_size = {};  // kTmpfs: its `size=` ("" for the kernel's default)
  friend bool operator==(const TaskMount&, const TaskMount&) = default;
};

struct TaskPlan {
  std::string jail;
  std::vector<TaskMount> mounts;  // in order
  // Mounted after `mounts`, whatever the options: the step's Slurm
  // configuration (SlurmConfInJail) and /dev/null over /dev/termination-log,
  // which Kubernetes makes writable by everyone in the pod.
  std::vector<TaskMount> system_mounts;
  // Directories of the jail that stay writable when its root is made
  // read-only: with tmp=jail, its own /tmp and /var/tmp.
  std::vector<std::string> writable;
  bool fresh_proc = true;
};

// Where a task finds the step's Slurm configuration. slurmstepd forces its own
// SLURM_CONF into every task's environment; in a configless node that is
// slurmd's conf-cache (<SlurmdSpoolDir>/conf-cache/slurm.conf), which the jail
// does not have, so srun in a batch script would fail.
struct SlurmConfView {
  std::string host_dir;   // bound read-only onto the jail's /etc/slurm ("" for no bind)
  std::string task_conf;  // the task's SLURM_CONF ("" to leave it as it is)
};

// Pure. A configuration in /etc/slurm, or below a `binds=` source, is already
// where tasks see it (task_conf names where that is); any other directory is
// bound onto /etc/slurm.
SlurmConfView SlurmConfInJail(const Options& options, const std::string& slurm_conf);

// What the view is for: the job namespace (built once by the extern step's
// holder) or one task (namespace=task, or no job namespace).
enum class ViewFor { kTask, kJobNamespace };

// Pure: what EnterJail will do for `options` and the job's private tmp directory
// (`job_tmp` empty when tmp=jail), with slurmstepd's SLURM_CONF `slurm_conf`.
// With a private /tmp the job also gets its own /var/tmp (JobVarTmpPath) and
// /dev/shm (a tmpfs of its namespace's own). In a job namespace /tmp and
// /var/tmp are each a tmpfs of options.tmp_size instead of those directories,
// so a job cannot fill the node's disk; a task's own namespace binds the
// directories, which every step of the job shares.
TaskPlan BuildTaskPlan(const Options& options, const std::string& job_tmp,
                       const std::string& slurm_conf = "", ViewFor view = ViewFor::kTask);

// Carries out `plan` in the calling process (root, CAP_SYS_ADMIN). On return the
// process's root is the jail. On failure the process may be half-way (in its
// own mount namespace): the caller must fail the task, never run it.
Status EnterJail(const TaskPlan& plan);

// The last step in the task's own process before Slurm drops privileges and
// execs the user's program: PR_SET_NO_NEW_PRIVS (inherited by every child, so no
// setuid or file-capability program gains anything), and, when `task_conf` is
// not empty, SLURM_CONF set to it (slurmstepd copies its own into the task's
// environment after this).
Status SealTask(const std::string& task_conf);

}  // namespace k8sbridge::jail
