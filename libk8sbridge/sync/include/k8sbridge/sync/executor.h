// Carries out the Reconciler's actions: Kubernetes through kube::Client (node
// updates guarded by resourceVersion, pod deletes by uid precondition), Slurm
// through the Slurm port (slurm::Slurm: libslurm in the program, the recording
// fake of tests/fakes in tests), Events through an optional EventRecorder.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"
#include "k8sbridge/sync/reconcile.h"

namespace k8sbridge::sync {

struct ExecutorOptions {
  ExecutorOptions() = default;
  ExecutorOptions(std::string cluster_name, std::string pod_namespace)
      : cluster(std::move(cluster_name)), namespace_(std::move(pod_namespace)) {}
  std::string cluster;
  std::string namespace_;  // of the worker pods
  // An action repeated within this window (the caches have not caught up with our
  // own change yet) is skipped.
  Clock::Steady::duration repeat_window = std::chrono::seconds(5);
  // Asked right before every action: false (this daemon may no longer hold the
  // lease) and the action is not done (Status::Cancelled). Unset: always true.
  std::function<bool()> leading;
  // The power programs' setup (k8sbridge.conf and the pod templates): a reboot's new
  // pod is made as k8sbridge-power's resume makes one. Null: kRecreatePod fails.
  const power::PowerSetup* power = nullptr;
};

// Pod deletes, Slurm fails and drains: what the mass-action guard caps.
bool Destructive(ActionKind kind);
// The cap on destructive actions in one pass: `configured` (SyncMaxActionsPerPass)
// when set, else automatic: 10% of the Slurm nodes, at least 20.
size_t MaxDestructive(int configured, size_t slurm_nodes);

struct PassResult {
  int done = 0, failed = 0;
  // Why (part of) the pass was not done: "" (all done), "mass_action" (more
  // destructive actions than the cap: none of them done, the rest done) or
  // "not_leader" (leadership went mid-pass: the rest not done). `why`: log text.
  std::string skipped, why;
};

class Executor {
 public:
  Executor(kube::Client& client, slurm::Slurm& slurm, kube::EventRecorder* events, Logger& log,
           ExecutorOptions options);
  // Carries out one action; a skipped repeat is OK, and so is an action that a
  // live re-read shows is no longer due (logged). Cancelled if not leading.
  Status Execute(const Action& action);
  // One pass: every action in order, under the mass-action guard (more than
  // `max_destructive` destructive actions: none of those) and the leadership check
  // (lost: the pass stops).
  // `done(action, result)`: result "ok", "error" or "not_due", for each action tried.
  PassResult ExecutePass(const std::vector<Action>& actions, size_t max_destructive,
                         const std::function<void(const Action&, std::string_view)>& done = {});

 private:
  enum class Outcome { kDone, kRepeat, kNotDue, kFailed, kNotLeading };
  Outcome Attempt(const Action& action, Status& status);
  Status Run(const Action& action);
  // kFail, kDrain, kResume: the live re-checks, then the Slurm call.
  Status Fail(const Action& action);
  Status DrainNode(const Action& action);
  Status ResumeNode(const Action& action);
  // kRenewPowerDown: the live re-check, then POWER_DOWN.
  Status RenewPowerDown(const Action& action);
  // kReboot and kRecreatePod: the live re-checks, then Slurm's reboot or the pod.
  Status RebootNode(const Action& action);
  Status RecreatePod(const Action& action);
  // The node read live; not_due_ says why `action` is no longer due on it ("" if it is).
  Result<SlurmNode> LiveIfDue(const Action& action);
  // A live list of the node's pods (by its node label): one of ours exists → not_due_
  // = if_one. None (or only pods stranded on lost Kubernetes nodes) → OK. An API
  // error is returned: nothing is done.
  Status CheckNoPodOfOurs(const std::string& name, std::string_view if_one);
  // The Kubernetes node read live: nullptr when it is gone (404); an error otherwise.
  Result<std::unique_ptr<kube::Object>> LiveNode(const std::string& name);
  Status Cordon(const Action& action);
  Status Uncordon(const Action& action);
  Status PatchPodAnnotations(const Action& action, bool set);
  Status DeletePod(const Action& action);
  Status SetFeatures(const Action& action);
  Status SetTopology(const Action& action);
  void PodEvent(const Action& action, std::string_view type, std::string_view reason,
                std::string_view note);

  kube::Client& client_;
  slurm::Slurm& slurm_;
  kube::EventRecorder* events_;
  Logger& log_;
  ExecutorOptions options_;
  std::map<std::string, Clock::Steady::time_point> recent_;
  std::string not_due_;  // set by Run when a live re-read shows the action is not due
};

}  // namespace k8sbridge::sync
