#include "k8sbridge/jail/step.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/jail/identity.h"
#include "k8sbridge/jail/job_ns.h"
#include "k8sbridge/jail/job_tmp.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/jail/probe.h"

namespace k8sbridge::jail {

// ---- RealJailSystem ----------------------------------------------------------

Status RealJailSystem::Probe(const Options& o) {
  return ProbeJail(o.jail, o.probe, o.probe_timeout);
}
Status RealJailSystem::CheckRoot(const Options& o) {
  return CheckJailRoot(o.jail, 0);
}
Status RealJailSystem::CheckBinds(const TaskPlan& plan) {
  auto jail_fd = OpenJailRoot(plan.jail);
  if (!jail_fd.ok())
    return jail_fd.status();
  std::vector<TaskMount> all = plan.mounts;
  all.insert(all.end(), plan.system_mounts.begin(), plan.system_mounts.end());
  for (const TaskMount& m : all) {
    if (m.kind == TaskMount::Kind::kTmpfs)
      continue;
    if (m.optional_target && !OpenBeneath(jail_fd->get(), m.target, plan.jail).ok())
      continue;  // EnterJail skips it too
    if (auto source = OpenHostPath(m.source, "bind source"); !source.ok())
      return source.status().WithContext(fmt::format("bind for {}", m.target));
    if (m.create_target || m.target == "/tmp")
      continue;
    auto target = OpenBeneath(jail_fd->get(), m.target, plan.jail);
    if (!target.ok())
      return target.status().WithContext(fmt::format("bind {}", m.source));
  }
  return Status::Ok();
}
Status RealJailSystem::CreateTmp(const Options& o, const std::string& node, uint32_t job_id) {
  return CreateJobTmp(o.tmp_base, node, job_id);
}
Status RealJailSystem::RemoveTmp(const Options& o, const std::string& node, uint32_t job_id) {
  return RemoveJobTmp(o.tmp_base, node, job_id);
}
Status RealJailSystem::Enter(const TaskPlan& plan) {
  return EnterJail(plan);
}
Status RealJailSystem::StartJobNamespace(const Options& o, const TaskPlan& plan,
                                         const std::string& node, uint32_t job_id) {
  if (Status s = CreateNodeDir(o.tmp_base, node); !s.ok())
    return s;
  return jail::StartJobNamespace(plan, o.probe, JobNamespacePathsFor(o.tmp_base, node, job_id),
                                 o.probe_timeout);
}
Result<UniqueFd> RealJailSystem::OpenJobNamespace(const Options& o, const std::string& node,
                                                  uint32_t job_id) {
  // The state file and socket are trusted only in a node directory nobody
  // else can write to.
  if (Status s = CheckNodeDir(o.tmp_base, node); !s.ok())
    return s;
  return jail::OpenJobNamespace(JobNamespacePathsFor(o.tmp_base, node, job_id), o.jail, o.probe,
                                o.probe_timeout);
}
Status RealJailSystem::JoinJobNamespace(int ns_fd) {
  return jail::JoinJobNamespace(ns_fd);
}
Status RealJailSystem::RemoveJobNamespace(const Options& o, const std::string& node,
                                          uint32_t job_id) {
  return jail::RemoveJobNamespace(JobNamespacePathsFor(o.tmp_base, node, job_id));
}
Status RealJailSystem::CheckUser(const Options& o, uid_t uid, const std::string& user) {
  return CheckUserInJail("/etc/passwd", uid, user, o.jail);
}
Status RealJailSystem::Drain(const std::string& node, const std::string& reason) {
  if (slurm_ == nullptr)
    return why_no_slurm_;
  return slurm_->Drain(node, reason);
}

// ---- JailStep ----------------------------------------------------------------

std::string DrainReason(const Status& why) {
  std::string reason = fmt::format("{} {}", contract::kJailReasonPrefix, why.message());
  constexpr size_t kMax = 240;
  if (reason.size() > kMax)
    reason = reason.substr(0, kMax - 3) + "...";
  return reason;
}

Status JailStep::FailNode(const StepInfo& step, const Status& why) {
  log_.Error("job {} step {} on {}: {}", step.job_id, step.step_id, step.node, why.message());
  if (options_.drain) {
    std::string reason = DrainReason(why);
    if (Status s = system_.Drain(step.node, reason); !s.ok()) {
      log_.Error("could not drain {} ({}): {}", step.node, reason, s.message());
    } else {
      log_.Info("drained {}: {}", step.node, reason);
    }
  }
  return why;
}

namespace {

long MicrosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
}

}  // namespace

Status JailStep::Prepare(const StepInfo& step) {
  auto start = std::chrono::steady_clock::now();
  step_ = step;
  decision_ = Decision::kUndecided;
  task_slurm_conf_.clear();
  job_ns_ = UniqueFd();
  bool refused_root = step.uid == 0 && !options_.allow_root;
  if (step.step_id == kExternStep) {
    // The extern step itself stays on the host (it runs nothing of the user's).
    decision_ = Decision::kHost;
    if (options_.ns == NamespaceMode::kJob && !refused_root)
      StartJobNamespace(step);
    return Status::Ok();
  }
  if (refused_root) {
    // Refused per task, not here: failing a batch step's init_post_opt would
    // drain the node, and a root job is not a node problem.
    refusal_ = Status::PermissionDenied(fmt::format(
        "job {} step {} runs as root (uid 0): spank_jail refuses root jobs, since root in the "
        "jail is root in a privileged pod; submit it as a user, or set allow_root=yes on the "
        "spank_jail line in plugstack.conf",
        step.job_id, step.step_id));
    log_.Error("{}", refusal_.message());
    decision_ = Decision::kRefused;
    return Status::Ok();
  }
  if (step.no_jail_requested) {
    if (options_.allow_no_jail) {
      log_.Info(
          "job {} step {}: --no-jail requested and allowed by allow_no_jail=yes: "
          "running on the host",
          step.job_id, step.step_id);
      decision_ = Decision::kHost;
      return Status::Ok();
    }
    log_.Warning(
        "job {} step {}: user {} asked for --no-jail, which the administrator has not "
        "allowed (allow_no_jail=no): entering the jail anyway",
        step.job_id, step.step_id, step.user);
  }
  // The probe runs first and alone may touch a hung jail; everything after it
  // reads the jail only once it has answered. With a job namespace the holder
  // probes (the jail as the job sees it) and answers with the namespace; a
  // jail that broke since the job started still fails the step and drains the
  // node before its tasks touch it.
  if (options_.ns == NamespaceMode::kJob) {
    auto ns = system_.OpenJobNamespace(options_, step.node, step.job_id);
    if (ns.ok()) {
      job_ns_ = std::move(*ns);
    } else if (ns.status().code() != Status::Code::kUnavailable) {
      return FailNode(step, ns.status());
    } else {
      log_.Debug("job {} step {}: {}; tasks enter the jail one by one", step.job_id, step.step_id,
                 ns.status().message());
    }
  }
  if (!job_ns_.valid()) {
    if (Status s = system_.Probe(options_); !s.ok())
      return FailNode(step, s);
  }
  long probe_us = MicrosSince(start);
  if (Status s = system_.CheckRoot(options_); !s.ok())
    return FailNode(step, s);
  if (!job_ns_.valid()) {
    TaskPlan plan;
    if (Status s = CheckAndPlan(step, &plan); !s.ok())
      return FailNode(step, s);
    plan_ = std::move(plan);
  }
  decision_ = Decision::kJail;
  task_slurm_conf_ = SlurmConfInJail(options_, step.slurm_conf).task_conf;
  // Read by bench/jail_bench.py: the plugin's own cost, free of scheduling noise.
  log_.Debug("job {} step {}: jail checked and step prepared in {} us (probe {} us)", step.job_id,
             step.step_id, MicrosSince(start), probe_us);
  return Status::Ok();
}

Status JailStep::CheckAndPlan(const StepInfo& step, TaskPlan* plan) {
  std::string job_tmp;
  if (options_.tmp == TmpMode::kPrivate) {
    if (Status s = system_.CreateTmp(options_, step.node, step.job_id); !s.ok())
      return s.WithContext("private /tmp");
    job_tmp = JobTmpPathFor(step);
  }
  *plan = BuildTaskPlan(options_, job_tmp, step.slurm_conf,
                        step.step_id == kExternStep ? ViewFor::kJobNamespace : ViewFor::kTask);
  return system_.CheckBinds(*plan);
}

void JailStep::StartJobNamespace(const StepInfo& step) {
  auto start = std::chrono::steady_clock::now();
  // A broken jail is not this step's to report: failing the extern step would
  // fail the job's prolog. The job's steps find no namespace, check the jail
  // themselves, and fail and drain with the reason.
  Status s = system_.Probe(options_);
  if (s.ok())
    s = system_.CheckRoot(options_);
  TaskPlan plan;
  if (s.ok())
    s = CheckAndPlan(step, &plan);
  if (s.ok())
    s = system_.StartJobNamespace(options_, plan, step.node, step.job_id);
  if (!s.ok()) {
    log_.Warning("job {} on {}: no job namespace ({}); its tasks enter the jail one by one",
                 step.job_id, step.node, s.message());
    return;
  }
  log_.Debug("job {}: job namespace started in {} us", step.job_id, MicrosSince(start));
}

std::string JailStep::JobTmpPathFor(const StepInfo& step) const {
  return JobTmpPath(options_.tmp_base, step.node, step.job_id);
}

Status JailStep::EnterTask() {
  switch (decision_) {
    case Decision::kHost:
      return Status::Ok();
    case Decision::kRefused:
      return refusal_;
    case Decision::kUndecided:
      return Status::PermissionDenied(fmt::format(
          "job {} step {}: the jail was not set up for this step (see the spank_jail error "
          "before this one): refusing to run its tasks outside the jail",
          step_.job_id, step_.step_id));
    case Decision::kJail:
      break;
  }
  auto start = std::chrono::steady_clock::now();
  Status entered = job_ns_.valid() ? system_.JoinJobNamespace(job_ns_.get()) : system_.Enter(plan_);
  if (Status s = entered; !s.ok()) {
    Status failed = s.WithContext(fmt::format("entering jail {} for job {} step {}", options_.jail,
                                              step_.job_id, step_.step_id));
    log_.Error("{}", failed.message());
    return failed;
  }
  log_.Debug("job {} step {}: task entered the jail in {} us", step_.job_id, step_.step_id,
             MicrosSince(start));
  return Status::Ok();
}

Status JailStep::CheckTaskUser() {
  if (!active() || options_.identity == IdentityCheck::kNone)
    return Status::Ok();
  Status s = system_.CheckUser(options_, step_.uid, step_.user);
  if (!s.ok())
    log_.Error("{}", s.message());
  return s;
}

Status JobEpilog(const Options& options, JailSystem& system, const std::string& node,
                 uint32_t job_id, Logger& log) {
  Status result = system.RemoveJobNamespace(options, node, job_id);
  if (!result.ok())
    log.Error("job {}: {}", job_id, result.message());
  if (options.tmp == TmpMode::kPrivate) {
    if (Status s = system.RemoveTmp(options, node, job_id); !s.ok()) {
      log.Error("job {}: cannot remove its private /tmp: {}", job_id, s.message());
      result = s;
    }
  }
  return result;
}

}  // namespace k8sbridge::jail
