// The sync daemon's loop (docs/sync.md, "Safety"): Slurm polled on its own
// thread, the informers' caches, the fail-closed gate that lets a pass act only
// on fresh information while leading, and the pass itself (plan, execute,
// metrics). Time comes from a Clock, so that the gate is tested on a FakeClock;
// programs/sync/main.cpp only parses flags and wires the parts together.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/kube/leader.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/status.h"
#include "k8sbridge/sync/executor.h"
#include "k8sbridge/sync/reconcile.h"

namespace k8sbridge::sync {

// Why a pass may not act at all, in the order the gate checks them.
enum class Gate {
  kOpen,                  // both sides fresh and leading: the pass acts
  kSlurmUnreadable,       // the latest slurm_load_node failed or is too old
  kKubernetesUnreadable,  // an informer not synced or failing, or the API server failing
  kNotLeader,             // another daemon holds the Lease (or none does yet)
};
// The label of k8sbridge_sync_reconciles_skipped_total{reason}: "slurm_unreadable",
// "kubernetes_unreadable", "not_leader"; "" for kOpen.
std::string_view GateReason(Gate gate);

// The gate's verdict on one pass; `detail` is the log text ("Slurm cannot be read
// (...)"), so that a change of cause is logged once even when the gate stays shut.
struct GateState {
  Gate gate = Gate::kOpen;
  std::string detail;
  bool open() const { return gate == Gate::kOpen; }
  friend bool operator==(const GateState&, const GateState&) = default;
};

// Slurm's latest answer, as the poller thread left it.
struct SlurmSnapshot {
  Status status = Status::Unavailable("slurm_load_node has not answered yet");
  std::vector<SlurmNode> nodes;
  Clock::Steady::time_point when{};  // of the latest successful load
};

// How the Kubernetes side looks at the start of a pass.
struct KubeHealth {
  bool pods_live = false;   // the pod informer is synced and its last list/watch worked
  bool nodes_live = false;  // likewise the node informer
  bool api_answering = false;
  bool ok() const { return pods_live && nodes_live && api_answering; }
};

// The fail-closed gate: Slurm first, then Kubernetes, then leadership.
GateState EvaluateGate(const SlurmSnapshot& slurm, Clock::Steady::time_point now,
                       Clock::Steady::duration slurm_max_age, const KubeHealth& kube, bool leader);

// How old Slurm's answer may be for a pass to act: max(10 s, 4 polls).
Clock::Steady::duration SlurmMaxAge(Clock::Steady::duration poll_interval);

// Whether the API server answered the latest request (watches aside: a stalled
// watch looks healthy to its informer, which is why this is kept at all). Fed by
// the client's kube::Metrics; the lease is read or renewed every few seconds, so
// this follows the server within that. Ordered by a counter, not a clock.
class ApiAnswering {
 public:
  void RequestDone(std::string_view verb, int code);
  bool answering() const { return last_fail_.load() <= last_ok_.load(); }
  // 0 (no answer), 429 and 5xx are failures, as kube::Client counts them.
  static bool Failed(int code) { return code == 0 || code == 429 || code >= 500; }

 private:
  std::atomic<uint64_t> seq_{0}, last_ok_{0}, last_fail_{0};
};

// What the loop reports; the program's implementation is Prometheus (docs/sync.md,
// "Metrics").
class DaemonMetrics {
 public:
  virtual ~DaemonMetrics() = default;
  virtual void SlurmLoadFailed() = 0;
  virtual void Fresh(std::string_view side, bool fresh) = 0;  // "slurm", "kubernetes"
  virtual void Leader(bool leading) = 0;
  virtual void Skipped(std::string_view reason) = 0;
  virtual void Census(const World& world) = 0;
  virtual void Action(ActionKind kind, std::string_view result) = 0;
  virtual void Resumed(Clock::Steady::duration took) = 0;
  virtual void Breaker(const std::string& group, bool open) = 0;
  virtual void Reconciled(Clock::Steady::duration took) = 0;
};

// The Kubernetes side as the loop reads it: the informers' caches.
class KubeCaches {
 public:
  virtual ~KubeCaches() = default;
  virtual KubeHealth Health() const = 0;
  virtual std::vector<kube::Object> Pods() const = 0;
  virtual std::vector<kube::Object> Nodes() const = 0;
};

// The program's KubeCaches: an informer on the cluster's worker pods and one on
// the Kubernetes nodes; every change calls `changed` (which wakes the loop).
class InformerCaches final : public KubeCaches {
 public:
  InformerCaches(kube::Client& client, const conf::BridgeConfig& config, kube::Metrics* metrics,
                 const ApiAnswering& api, std::function<void()> changed);
  void Start();
  void Stop();
  KubeHealth Health() const override;
  std::vector<kube::Object> Pods() const override { return pods_.List(); }
  std::vector<kube::Object> Nodes() const override { return nodes_.List(); }

 private:
  const ApiAnswering& api_;
  kube::Informer pods_, nodes_;
};

// The Lease as k8sbridge-sync uses it: renew within 2/3 of SyncLeaseDuration,
// retry every 1/7 (at least 1 s).
kube::LeaderElectionOptions LeaderOptions(const conf::BridgeConfig& config,
                                          const std::string& identity);
// SyncLeaseName, or k8sbridge-sync-<ClusterName> in Kubernetes' name syntax.
std::string LeaseName(const conf::BridgeConfig& config);

// Leader election on its own thread, logging and reporting each change of leader;
// `started_leading` runs when this daemon takes the Lease (the loop wakes).
class Election {
 public:
  Election(kube::Client& client, const conf::BridgeConfig& config, const std::string& identity,
           Logger& log, DaemonMetrics& metrics, std::function<void()> started_leading);
  ~Election();
  bool IsLeader() const { return elector_.IsLeader(); }
  Clock::Steady::duration renew_deadline() const { return options_.renew_deadline; }
  const std::string& lease_name() const { return options_.name; }
  // Stops the thread; the Lease is released, so the other daemon takes over at once.
  void Stop();

 private:
  kube::LeaderElectionOptions options_;
  kube::LeaderElector elector_;
  kube::CancelToken cancel_;
  std::thread thread_;
};

// Pass scheduling: a pass runs every SyncPollInterval and at once when woken (an
// informer's change, a changed Slurm answer, a new lead). Shared by those parts,
// so it is made before any of them.
class Wakeup {
 public:
  void Wake();
  // Waits for Wake() or `timeout`, whichever is first; false once `stop` is set.
  // `woken` (optional) says whether a Wake() ended the wait. A condition variable,
  // not the Clock: a change must end the wait at once, and the tests drive passes
  // directly (Daemon::RunPass, Daemon::Tick) instead of waiting.
  bool Wait(Clock::Steady::duration timeout, const std::atomic<bool>& stop, bool* woken = nullptr);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// What the loop works with. Time is the client's clock (a FakeClock in tests).
struct DaemonParts {
  kube::Client& client;
  kube::EventRecorder* events;  // optional
  slurm::Slurm& slurm;
  KubeCaches& kube;
  std::function<bool()> is_leader;
  Clock::Steady::duration renew_deadline;  // of the Lease (LeaderOptions)
  DaemonMetrics& metrics;
  Logger& log;
  Wakeup& wakeup;
};

// One daemon's loop.
class Daemon {
 public:
  // `power`: the pod templates, for rollouts (null: none).
  Daemon(const conf::BridgeConfig& config, DaemonParts parts,
         const power::PowerSetup* power = nullptr);

  // One slurm_load_node, kept as the latest snapshot; a change wakes the loop.
  void PollSlurm();
  // One pass: the gate, and when it is open the plan and its actions. Returns the
  // gate's verdict.
  GateState RunPass();
  // What the loop runs every SyncPollInterval and at each wake: the gate (its
  // metrics and log stay current), and a full pass (RunPass) only when its plan may
  // differ from the last one's: `changed` (an informer or Slurm saw a change), the
  // gate changed, a pod template file changed, the last pass planned actions (they
  // may need a retry), a grace or a circuit breaker's cool-down is running, or
  // kQuietPassEvery passed since the last full pass. A quiet cluster so costs a
  // gate check per tick, not a plan over every node and pod.
  GateState Tick(bool changed);
  static constexpr std::chrono::seconds kQuietPassEvery{30};

  // Polls Slurm on a thread of its own and runs passes until `stop`; then joins.
  void Run(const std::atomic<bool>& stop);

 private:
  // Leadership is asked before every action, and a pass that has run longer than
  // the renew deadline stops too: its plan is that old, and the Lease may have
  // changed hands since (IsLeader turns false only some time after a renewal
  // failed).
  bool LeadingThisPass();
  void PollSlurmUntil(const std::atomic<bool>& stop);
  void ReportGate(const GateState& gate);
  // The gate at `now` on `snap` (a copy of the latest Slurm snapshot, without its
  // nodes unless `with_nodes`), with the freshness and leader metrics.
  GateState CheckGate(Clock::Steady::time_point now, SlurmSnapshot& snap, bool with_nodes);
  void Act(const World& world, Clock::Steady::time_point started);
  // Reloads the pod templates when one of their files changed (a ConfigMap update
  // swaps them under a running daemon), so rollouts compare with what
  // k8sbridge-power renders now. A broken file keeps the last good templates.
  // Returns whether the templates were reloaded.
  bool RefreshTemplates();

  const conf::BridgeConfig& config_;
  DaemonParts parts_;
  Clock& clock_;
  std::unique_ptr<power::PowerSetup> setup_;  // null: no node groups, no rollouts
  std::string templates_stamp_;               // the files' paths, mtimes and sizes
  Reconciler reconciler_;
  Executor executor_;
  const Clock::Steady::duration slurm_max_age_;
  mutable std::mutex snapshot_mu_;
  SlurmSnapshot snapshot_;
  std::atomic<int64_t> pass_started_{0};   // steady ticks
  GateState last_gate_;                    // logged once per change
  Clock::Steady::time_point last_full_{};  // the last full pass (RunPass)
  size_t last_actions_ = 0;                // actions the last full pass planned
  std::string last_guard_;                 // the mass-action guard's or a lost lead's, likewise
};

// --once: one pass from fresh lists. With `elector`, the Lease is taken first
// (refused, exit 1, while another daemon holds it) and released at the end.
// Returns the exit code: 1 if the Lease was held, a side could not be read, an
// action failed or the mass-action guard held the pass back.
int RunOnce(const conf::BridgeConfig& config, kube::Client& client, slurm::Slurm& slurm,
            Logger& log, kube::LeaderElector* elector, const power::PowerSetup* power = nullptr);

}  // namespace k8sbridge::sync
