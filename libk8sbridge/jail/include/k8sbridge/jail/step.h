// What spank_jail does in each Slurm context, with Slurm and the system behind
// interfaces so the decisions are unit-tested. The plugin's ABI file
// (plugins/spank_jail/spank_jail.cpp) reads Slurm's items into StepInfo and
// calls these.
//
//   slurmstepd, init_post_opt (root, once per step):  JailStep::Prepare
//       (in the extern step: starts the job's namespace, see job_ns.h)
//   slurmstepd, task_init_privileged (root, per task): JailStep::EnterTask
//   slurmstepd, task_init (the user, inside the jail): JailStep::CheckTaskUser
//   slurmd, job_epilog (root, once per job and node):  JobEpilog
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "k8sbridge/jail/enter.h"
#include "k8sbridge/jail/options.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/log.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// Special step ids (slurm.h).
inline constexpr uint32_t kBatchStep = 0xfffffffb;
inline constexpr uint32_t kExternStep = 0xfffffffc;
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;

// The exit status of a task that spank_jail stops before it runs (the jail
// could not be entered, its set-up failed or never ran, a refused root job):
// the plugin ends the task's process itself, so no user code runs outside the
// jail even when plugstack.conf loads it as `optional` and Slurm ignores its
// errors.
inline constexpr int kTaskRefusedExitCode = 213;

struct StepInfo {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uid_t uid = 0;
  std::string user;                // resolved on the host; "uid N" when the host cannot
  std::string node;                // this node's Slurm name
  bool no_jail_requested = false;  // the user passed --no-jail (or its variable)
  std::string slurm_conf;          // slurmstepd's SLURM_CONF, which Slurm copies into every task
};

// The outside world the step logic touches.
class JailSystem {
 public:
  virtual ~JailSystem() = default;
  virtual Status Probe(const Options& o) = 0;
  virtual Status CheckRoot(const Options& o) = 0;
  // Every bind source exists on the host and every target outside the private
  // /tmp exists in the jail without resolving through a symlink out of it.
  virtual Status CheckBinds(const TaskPlan& plan) = 0;
  virtual Status CreateTmp(const Options& o, const std::string& node, uint32_t job_id) = 0;
  virtual Status RemoveTmp(const Options& o, const std::string& node, uint32_t job_id) = 0;
  virtual Status Enter(const TaskPlan& plan) = 0;
  // The job-wide namespace (job_ns.h): started by the extern step, asked for
  // (with a probe of the jail) by the other steps, joined by their tasks.
  // OpenJobNamespace is Unavailable when the job has no namespace.
  virtual Status StartJobNamespace(const Options& o, const TaskPlan& plan, const std::string& node,
                                   uint32_t job_id) = 0;
  virtual Result<UniqueFd> OpenJobNamespace(const Options& o, const std::string& node,
                                            uint32_t job_id) = 0;
  virtual Status JoinJobNamespace(int ns_fd) = 0;
  virtual Status RemoveJobNamespace(const Options& o, const std::string& node, uint32_t job_id) = 0;
  // Runs inside the jail: is `uid` a user there?
  virtual Status CheckUser(const Options& o, uid_t uid, const std::string& user) = 0;
  virtual Status Drain(const std::string& node, const std::string& reason) = 0;
};

// The real system; draining goes through the Slurm port (the plugin passes the
// daemon's own, slurm/daemon.h). Without one (`slurm` null) a drain fails with
// `why_no_slurm`.
class RealJailSystem final : public JailSystem {
 public:
  RealJailSystem(slurm::Slurm* slurm, Status why_no_slurm)
      : slurm_(slurm), why_no_slurm_(std::move(why_no_slurm)) {}
  Status Probe(const Options& o) override;
  Status CheckRoot(const Options& o) override;
  Status CheckBinds(const TaskPlan& plan) override;
  Status CreateTmp(const Options& o, const std::string& node, uint32_t job_id) override;
  Status RemoveTmp(const Options& o, const std::string& node, uint32_t job_id) override;
  Status Enter(const TaskPlan& plan) override;
  Status StartJobNamespace(const Options& o, const TaskPlan& plan, const std::string& node,
                           uint32_t job_id) override;
  Result<UniqueFd> OpenJobNamespace(const Options& o, const std::string& node,
                                    uint32_t job_id) override;
  Status JoinJobNamespace(int ns_fd) override;
  Status RemoveJobNamespace(const Options& o, const std::string& node, uint32_t job_id) override;
  Status CheckUser(const Options& o, uid_t uid, const std::string& user) override;
  Status Drain(const std::string& node, const std::string& reason) override;

 private:
  slurm::Slurm* slurm_;
  Status why_no_slurm_;
};

class JailStep {
 public:
  JailStep(Options options, JailSystem& system, Logger& log)
      : options_(std::move(options)), system_(system), log_(log) {}

  // Decides whether this step is jailed and checks the jail. A broken jail
  // (missing, unmounted, hung, unsafe) fails the step and drains the node; the
  // extern step and an admin-allowed --no-jail leave the step on the host.
  // With namespace=job the extern step starts the job's namespace (best
  // effort: it never fails the extern step), and the other steps join it when
  // it exists.
  Status Prepare(const StepInfo& step);
  // Moves the calling task into the jail: into the job's namespace when there
  // is one, else a namespace of its own. Ok without entering only when Prepare
  // decided the step stays on the host (the extern step, an allowed --no-jail).
  // Every other case is an error the caller must end the task for: Prepare
  // failed or never ran (an `optional` plugin whose failure Slurm ignored), or
  // the job is root's and allow_root=no.
  Status EnterTask();
  // Inside the jail, as the user: the user must exist there.
  Status CheckTaskUser();

  bool active() const { return decision_ == Decision::kJail; }
  bool joins_job_namespace() const { return job_ns_.valid(); }
  const TaskPlan& plan() const { return plan_; }
  // The SLURM_CONF a task of this step needs in the jail ("" to keep slurmstepd's):
  // for SealTask (enter.h), once EnterTask let the task run.
  const std::string& task_slurm_conf() const { return task_slurm_conf_; }
  const Options& options() const { return options_; }

 private:
  Status FailNode(const StepInfo& step, const Status& why);
  std::string JobTmpPathFor(const StepInfo& step) const;
  // The checks and set-up every jailed step needs before its tasks can build
  // their namespaces (and the extern step before it builds the job's).
  Status CheckAndPlan(const StepInfo& step, TaskPlan* plan);
  void StartJobNamespace(const StepInfo& step);

  enum class Decision {
    kUndecided,  // Prepare has not run, or failed: no task may run
    kHost,       // the extern step, or --no-jail allowed: tasks stay on the host
    kJail,       // tasks enter the jail
    kRefused,    // a root job without allow_root: tasks are refused with refusal_
  };

  Options options_;
  JailSystem& system_;
  Logger& log_;
  Decision decision_ = Decision::kUndecided;
  Status refusal_;
  StepInfo step_;
  TaskPlan plan_;
  std::string task_slurm_conf_;
  UniqueFd job_ns_;  // the job's namespace, when this step's tasks join it
};

// Job end on a node: removes the job's private /tmp and namespace state file.
Status JobEpilog(const Options& options, JailSystem& system, const std::string& node,
                 uint32_t job_id, Logger& log);

// "spank_jail: <message>", cut to what Slurm keeps in a node reason.
std::string DrainReason(const Status& why);

}  // namespace k8sbridge::jail
