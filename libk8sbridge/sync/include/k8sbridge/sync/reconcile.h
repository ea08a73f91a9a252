// The sync daemon's decisions: from one snapshot of both sides (Slurm's nodes,
// the cluster's worker pods and the Kubernetes nodes) to a list of actions.
// docs/sync.md has the rules in a table; the code has them one family to a file
// in libk8sbridge/sync/src (src/rules.h lists them).
//
// What k8sbridge itself did is read back from markers on the objects, never kept
// in memory, so that a restarted daemon (or the other daemon taking over) neither
// repeats nor forgets anything:
//   - Slurm: every drain or DOWN it sets has a reason starting "k8sbridge:"; only
//     such drains are ever undone, and only those of the kind that names its cause;
//   - Kubernetes node: the taint contract::kHardwareTaintKey (only k8sbridge adds or removes
//     it), the annotation contract::kCordonedByAnnotation=<cluster> when it was k8sbridge that
//     set spec.unschedulable, and contract::kHardwareDrainsAnnotation listing the Slurm nodes
//     whose drains caused it;
//   - pod: the kDrain*Annotation annotations mirror the Slurm node's drain.
// Only timers (how long a pod has been unschedulable, a node POWERING_UP without a
// pod, an orphan) and the circuit breaker's recent failures live in memory: a
// restart starts those graces afresh, which only delays an action.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"

namespace k8sbridge::sync {

// Slurm reasons k8sbridge-sync writes; the first two are undone by it.
inline constexpr std::string_view kNodeTroublePrefix = "k8sbridge: Kubernetes node ";
inline constexpr std::string_view kBreakerPrefix =
    "k8sbridge: circuit breaker open for node group ";

// A Slurm node as the Slurm port reads it (k8sbridge/slurm/port.h).
using SlurmNode = slurm::Node;

// One snapshot of both sides. Pods: the worker pods of this cluster (selected by
// power::OwnedPodsSelector), in any phase; each is checked with IsOwnedWorkerPod
// before anything is done to it.
struct World {
  std::vector<SlurmNode> slurm;
  std::vector<kube::Object> pods;
  std::vector<kube::Object> nodes;
};

enum class ActionKind {
  kMirrorDrain,     // pod: set the kDrain*Annotation annotations (+ Event)
  kClearDrain,      // pod: remove them (+ Event)
  kCordon,          // Kubernetes node: our taint, cordon unless already cordoned, drains list
  kUncordon,        // Kubernetes node: remove our taint, uncordon only if we cordoned
  kDrain,           // Slurm node: DRAIN with reason
  kUndrain,         // Slurm node: UNDRAIN (only our drains)
  kFail,            // Slurm node: DOWN then POWER_DOWN with reason (jobs requeue, fresh pod next)
  kDeletePod,       // an orphan pod, by uid precondition
  kSetFeatures,     // Slurm node: features from relabelled Kubernetes node labels; pod: marker
  kResume,          // Slurm node: IDLE for a DOWN, POWERED_DOWN node we failed (back to service)
  kRenewPowerDown,  // Slurm node: POWER_DOWN an idle, powered-down node left NOT_RESPONDING
  kReboot,          // Slurm node: reboot ASAP, nextstate=RESUME (its pod's template changed)
  kRecreatePod,     // a node whose reboot Slurm issued, its old pod gone: a pod from the template
  kSetTopology,     // Slurm node: its leaf, from the Kubernetes node its pod runs on (25.05+)
};
std::string_view ActionKindName(ActionKind kind);  // "mirror_drain", ... (metric label)

// Which rule planned a kFail or kDrain: the executor re-checks that rule on a live
// read of the Slurm node (and, for kPodLost/kNoPodStarting, of the pod) before it acts.
enum class Rule {
  kOther,
  kPodFailed,         // kFail: the pod failed, finished, was deleted, or cannot start
  kPodLost,           // kFail: no pod while the node is up
  kNoPodStarting,     // kFail: no pod while the node is POWERING_UP
  kRegistrationLost,  // kFail: POWERING_UP while its pod has long been Running and Ready
  kUnschedulable,     // kFail: the pod stays Unschedulable
  kNodeTrouble,       // kDrain: the pod's Kubernetes node is NotReady, cordoned, tainted
  kNodeLost,          // kFail: the pod's Kubernetes node is lost (Ready Unknown) or gone
  kBreaker,           // kDrain: the node group's circuit breaker is open
  kReboot,            // kDeletePod: Slurm issued the node's reboot; its pod is the old one
};

struct Action {
  Action(ActionKind k, std::string t, std::string r = "")
      : kind(k), target(std::move(t)), reason(std::move(r)) {}
  ActionKind kind;
  std::string target;  // Slurm node, pod or Kubernetes node name
  std::string reason;  // Slurm reason (kDrain, kFail) or why (log, Event note)
  // kMirrorDrain: the annotation values.
  std::string drain_reason, drain_user, drain_time;
  // kCordon: the Slurm nodes whose hardware drains want it (sorted).
  std::vector<std::string> slurm_nodes;
  std::string uid;  // kDeletePod: precondition; kMirrorDrain/kClearDrain/kFail: the pod's
  // kFail for Rule::kNodeLost: the Kubernetes node, read again live before the DOWN.
  std::string k8s_node;
  // kSetFeatures: the Slurm node's new features (when update_slurm), and the pod
  // (pod_name) gets contract::kLabelFeaturesAnnotation = label_features. pod_name is
  // also the pod of kMirrorDrain, kClearDrain, kFail and kDeletePod (a replacement pod
  // is not named after its Slurm node, docs/power.md); "" = `target`.
  std::string features, features_act, label_features, pod_name;
  bool update_slurm = false;
  // kRecreatePod, and kDeletePod for Rule::kReboot: the reboot's key (the Slurm node's
  // reason_time when Slurm issued it), kept on the new pod (contract::kRebootOfAnnotation).
  std::string reboot_of;
  // kSetTopology: "<topology>:<leaf switch>", what `scontrol update Topology=` takes.
  std::string topology;
  Rule rule = Rule::kOther;
  std::string ToString() const;
};

// The defaults are k8sbridge.conf's (conf::SyncConf), so a test that builds options
// by hand plans as the daemon does.
struct ReconcileOptions {
  std::string cluster;
  std::string hardware_reason = conf::SyncConf{}.hardware_reason;
  Clock::Steady::duration unschedulable_grace = conf::SyncConf{}.unschedulable_grace;
  Clock::Steady::duration orphan_grace = conf::SyncConf{}.orphan_grace;
  Clock::Steady::duration registration_grace = conf::SyncConf{}.registration_grace;
  Clock::Steady::duration outage_hold = conf::SyncConf{}.outage_hold;
  // A pod that vanished while its node was up: confirmed over this long, so a
  // cache that lags slurmctld by a moment is not read as a deletion.
  Clock::Steady::duration pod_lost_grace = std::chrono::seconds(3);
  int breaker_threshold = conf::SyncConf{}.breaker_threshold;
  Clock::Steady::duration breaker_cooldown = conf::SyncConf{}.breaker_cooldown;
  // Which node group a Slurm node belongs to; nodes in no group are managed on the
  // Slurm -> Kubernetes side only (no pod rules).
  const conf::BridgeConfig* config = nullptr;
  // The hash of each node group's pod template (power::PodTemplate::hash), by group
  // name: a running pod with another hash is rolled. Empty: no rollouts.
  std::map<std::string, std::string> template_hashes;
  // SyncTopology: the tree topology a running node of an unpinned group is placed in
  // under its pod's leaf; "" = none (and on a Slurm without the update, 24.11).
  std::string topology;

  // `power`: the loaded pod templates, whose hashes drive rollouts (null: none).
  static ReconcileOptions From(const conf::BridgeConfig& config,
                               const power::PowerSetup* power = nullptr);
  // As From, for the daemon: SyncTopology needs Slurm's node topology update
  // (25.05+); where `slurm` has none (24.11) it is off, said once on `log` (debug).
  static ReconcileOptions For(const conf::BridgeConfig& config, const power::PowerSetup* power,
                              const slurm::Slurm& slurm, Logger& log);
};

// What one Kubernetes node currently asks of the Slurm nodes on it: a drain reason
// ("k8sbridge: Kubernetes node n-1 NotReady: ...") or nullopt.
std::optional<std::string> NodeTrouble(const kube::Object& node, std::string_view cluster);
// The Kubernetes node named in a reason written for NodeTrouble, or "".
std::string TroubleNodeOf(std::string_view reason);
// Why a pod will not become (or stopped being) a Slurm node: failed, image errors,
// evicted; "" if none. Of a container's message of several lines (its log's tail)
// only the error that ended it (LastErrorLine). Unschedulable is reported by
// UnschedulableMessage.
std::string PodFailure(const kube::Object& pod);
// The scheduler's message when the pod is PodScheduled=False Unschedulable, else "".
std::string UnschedulableMessage(const kube::Object& pod);
// True for a Slurm node that k8sbridge failed and Slurm has finished powering down:
// DOWN and POWERED_DOWN (not POWER_DOWN, POWERING_DOWN or POWERING_UP), with a
// reason starting contract::kBridgeReasonPrefix (k8sbridge-sync's or k8sbridge-power's: never an
// admin's, Slurm's own, k8sbridge-health's or spank_jail's), and not a circuit
// breaker's drain that is still open at `wall`. Slurm 24.11 keeps such a node
// DOWN for good (down~); RESUME makes it IDLE+POWERED_DOWN, so the next job that
// needs it resumes it with a fresh pod. The caller also checks that no pod of
// ours exists and that the node is a CLOUD node of a NodeGroup.
bool Returnable(const SlurmNode& n, Clock::Wall::time_point wall);
// IDLE and POWERED_DOWN, yet NOT_RESPONDING, with no power change asked or under
// way and no DRAIN, FAIL or reboot: what slurmctld's RESUME of a DOWN, powered-down
// node leaves (an admin's `scontrol update state=resume` of a down~ node, or an
// older k8sbridge's return). slurmctld schedules it until it restarts; a restarted
// slurmctld does not make it available, and every job that needs it waits for ever
// (ReqNodeNotAvail). A power-down cycle clears NOT_RESPONDING.
bool NeedsFreshPowerDown(const SlurmNode& n);
// Why `action` (kFail, kDrain or kResume, planned from a snapshot that may be
// old) is no longer due on `live`, a fresh read of its Slurm node; "" if it still
// is. A node being suspended is never failed: that is a normal power-down.
std::string NotDueOn(const Action& action, const SlurmNode& live, Clock::Wall::time_point wall);
// The expiry written into a circuit breaker's drain reason, if `reason` is one.
std::optional<Clock::Wall::time_point> BreakerUntil(std::string_view reason);

// RFC 3339 UTC, seconds ("2026-11-30T13:55:00Z"), and back (nullopt if unreadable).
std::string FormatTime(Clock::Wall::time_point t);
std::optional<Clock::Wall::time_point> ParseTime(std::string_view text);

class Reconciler {
 public:
  explicit Reconciler(ReconcileOptions options);
  // The actions that bring both sides in line. `now` drives the graces, `wall` the
  // circuit breaker's expiry written into reasons. Call only with a fresh World:
  // the caller checks both sides could be read.
  std::vector<Action> Plan(const World& world, Clock::Steady::time_point now,
                           Clock::Wall::time_point wall);
  // Forget the graces (called when a side could not be read: after an outage,
  // every grace starts over instead of firing at once on old observations), and
  // hold lost Kubernetes nodes for ReconcileOptions::outage_hold from the next Plan.
  void ResetTimers();
  // Whether the last Plan depends on time as well as on the snapshot: a grace is
  // running, a circuit breaker was open, a Slurm node has a breaker's drain (undone
  // at its expiry), or a lost node's failure waits for the outage hold. Otherwise the
  // same snapshot plans the same actions later, and the daemon need not plan again
  // until something changes.
  bool Waiting() const;
  // Open circuit breakers: node group -> until (wall time).
  std::map<std::string, Clock::Wall::time_point> OpenBreakers(Clock::Wall::time_point wall) const;
  // Resume-to-registration latencies seen since the last call (for a histogram).
  std::vector<Clock::Steady::duration> TakeResumeLatencies();
  // The templates were reloaded (ReconcileOptions::template_hashes).
  void SetTemplateHashes(std::map<std::string, std::string> hashes) {
    options_.template_hashes = std::move(hashes);
  }

 private:
  // true once `key` has held for `grace` (first seen now: false).
  bool Held(const std::string& key, Clock::Steady::duration grace);
  // A CLOUD node of a NodeGroup: the pod rules are for those only.
  bool PodRulesApply(const SlurmNode& n) const;
  // Within outage_hold of the first Plan after ResetTimers: a Kubernetes node
  // lost now may be the outage's doing, not the node's.
  bool InOutageHold() const;

  // The rule families, one a file in libk8sbridge/sync/src beside the checks that
  // its actions are still due (NotDueOn's cases; src/rules.h lists them).
  // mirrors_and_cordons.cpp: Slurm drains onto pods and hardware drains to cordons;
  // Kubernetes node trouble to drains; node labels to features and to topology.
  void PlanSlurmToKube(const World& world, std::vector<Action>& out);
  void PlanKubeToSlurm(const World& world, std::vector<Action>& out);
  void PlanFeatures(const World& world, std::vector<Action>& out);
  // The leaf of a running node's pod into Slurm's topology (docs/topology.md,
  // "Resumed nodes").
  void PlanTopology(const World& world, std::vector<Action>& out);
  // pod_faults.cpp: each cloud node's pod (nullptr: none) and what fails the node.
  // `host_lost`: why the pod's Kubernetes node is lost, "" if it is not.
  void PlanPods(const World& world, std::vector<Action>& out);
  void PlanNodePod(const SlurmNode& n, const conf::NodeGroup& group, const kube::Object* pod,
                   const std::string& host_lost, std::vector<Action>& out);
  // orphans.cpp: pods without a Slurm node to run.
  void PlanOrphans(const World& world, const std::map<std::string, const SlurmNode*>& slurm,
                   std::vector<Action>& out);
  // breakers_and_returns.cpp: the breaker's count of unschedulable pods and its
  // drains; failed nodes back to service; renewed power-downs.
  void CountUnschedulable(const std::string& group);
  void PlanBreakers(const World& world, std::vector<Action>& out);
  void PlanReturns(const World& world, std::vector<Action>& out);
  void PlanFreshPowerDowns(const World& world, std::vector<Action>& out);
  // rollouts.cpp (docs/sync.md, "Rollouts"): a running pod from an old template
  // asks Slurm for a reboot ASAP; once Slurm issues it, the old pod goes and a new
  // one comes from the current template.
  void PlanRollouts(const World& world, std::vector<Action>& out);
  void PlanRebootReplacement(const SlurmNode& n, const kube::Object* pod, std::vector<Action>& out);

  ReconcileOptions options_;
  std::regex hardware_;
  Clock::Steady::time_point now_{};
  Clock::Wall::time_point wall_{};
  std::map<std::string, Clock::Steady::time_point> since_;               // timers, by rule:node
  std::set<std::string> held_this_round_;                                // keys looked at in Plan
  std::map<std::string, std::deque<Clock::Wall::time_point>> failures_;  // group -> times
  std::map<std::string, Clock::Wall::time_point> open_until_;            // group -> until
  std::map<std::string, Clock::Steady::time_point> powering_up_since_;
  bool breaker_reasons_ = false;                      // the last Plan saw a breaker's drain reason
  bool outage_ = false;                               // ResetTimers since the last Plan
  std::optional<Clock::Steady::time_point> back_at_;  // the first Plan after it
  bool held_lost_ = false;  // the last Plan held a lost node's failure (InOutageHold)
  // During Plan: the world's Kubernetes nodes, owned pods (by Slurm node) and Slurm
  // nodes by name, pointing into the World being planned.
  struct ByName {
    std::map<std::string, const kube::Object*> nodes, pods;
    std::map<std::string, const SlurmNode*> slurm;
  } by_name_;
  std::vector<Clock::Steady::duration> resume_latencies_;
};

}  // namespace k8sbridge::sync
