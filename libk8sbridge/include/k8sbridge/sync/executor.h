// Carries out the Reconciler's actions: Kubernetes through kube::Client (node
// updates guarded by resourceVersion, pod deletes by uid precondition), Slurm
// through the SlurmControl interface (libslurm in the program, a recording fake
// in tests), Events through an optional EventRecorder.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "k8sbridge/sync/reconcile.h"

namespace k8sbridge::sync {

// The Slurm side of the daemon.
class SlurmControl {
 public:
  virtual ~SlurmControl() = default;
  // Every node. The libslurm implementation asks slurmctld for changes since the
  // last answer and returns its copy when there are none; an error means Slurm
  // could not be read (nothing destructive may follow).
  virtual Result<std::vector<SlurmNode>> LoadNodes() = 0;
  virtual Status Drain(std::string_view node, std::string_view reason) = 0;
  virtual Status Undrain(std::string_view node) = 0;
  // DOWN (jobs requeue at once), then POWER_DOWN (a fresh pod at the next resume).
  virtual Status DownAndPowerDown(std::string_view node, std::string_view reason) = 0;
  // Available and active features (slurm_update_node features / features_act).
  virtual Status UpdateFeatures(std::string_view node, std::string_view available,
                                std::string_view active) = 0;
};

// In memory: applies the calls to its nodes the way slurmctld would (roughly) and
// records them ("drain w-0 <reason>", "undrain w-0", "fail w-0 <reason>").
class RecordingSlurmControl final : public SlurmControl {
 public:
  Result<std::vector<SlurmNode>> LoadNodes() override;
  Status Drain(std::string_view node, std::string_view reason) override;
  Status Undrain(std::string_view node) override;
  Status DownAndPowerDown(std::string_view node, std::string_view reason) override;
  Status UpdateFeatures(std::string_view node, std::string_view available,
                        std::string_view active) override;

  void SetNodes(std::vector<SlurmNode> nodes);
  SlurmNode* Find(std::string_view node);  // nullptr if unknown
  void FailLoads(bool fail) { fail_loads_ = fail; }
  std::vector<std::string> calls() const;

 private:
  mutable std::mutex mu_;
  std::vector<SlurmNode> nodes_;
  std::vector<std::string> calls_;
  bool fail_loads_ = false;
};

struct ExecutorOptions {
  std::string cluster;
  std::string namespace_;  // of the worker pods
  // An action repeated within this window (the caches have not caught up with our
  // own change yet) is skipped.
  Clock::Steady::duration repeat_window = std::chrono::seconds(5);
};

class Executor {
 public:
  Executor(kube::Client& client, SlurmControl& slurm, kube::EventRecorder* events, Logger& log,
           ExecutorOptions options);
  // Carries out one action; a skipped repeat is OK.
  Status Execute(const Action& action);

 private:
  Status Run(const Action& action);
  Status Cordon(const Action& action);
  Status Uncordon(const Action& action);
  Status PatchPodAnnotations(const Action& action, bool set);
  Status DeletePod(const Action& action);
  Status SetFeatures(const Action& action);
  void PodEvent(const Action& action, std::string_view type, std::string_view reason,
                std::string_view note);

  kube::Client& client_;
  SlurmControl& slurm_;
  kube::EventRecorder* events_;
  Logger& log_;
  ExecutorOptions options_;
  std::map<std::string, Clock::Steady::time_point> recent_;
};

}  // namespace k8sbridge::sync
