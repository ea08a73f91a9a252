// What the sync daemon's rule families share. Each family is one file in
// libk8sbridge/sync/src, holding its Reconciler::Plan* steps and the checks that a
// planned action of it is still due on a live read (NotDueOn's cases, below):
//   mirrors_and_cordons.cpp  Slurm drains onto pods, hardware drains to cordons,
//                            Kubernetes node trouble to drains, labels to features
//                            and to Slurm's topology;
//   pod_faults.cpp           failed, lost, unstartable, unschedulable pods fail nodes;
//   orphans.cpp              pods no Slurm node needs are deleted;
//   breakers_and_returns.cpp the circuit breaker, failed nodes back to service,
//                            renewed power-downs;
//   rollouts.cpp             pods of an old template replaced through Slurm's reboot.
// reconcile.cpp runs them in order (Reconciler::Plan) and dispatches NotDueOn.
// A header of the sync layer's sources only.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/sync/reconcile.h"

namespace k8sbridge::sync {

// The value of annotation `key` on `o`, "" when it has none.
std::string Annotation(const kube::Object& o, std::string_view key);
// The condition of `type` in the array status.<array> of `o`, or nullptr.
const rapidjson::Value* Condition(const kube::Object& o, const char* array, std::string_view type);
// A pod stuck on a lost Kubernetes node, or on one that is gone (power::Stranded):
// Kubernetes may keep it for ever, so it counts as no pod.
bool IsStranded(const kube::Object& pod, const std::map<std::string, const kube::Object*>& nodes);

// Why a planned action is no longer due on `live`, a fresh read of its Slurm node
// ("" if it still is), one function a rule, beside the rule.
// mirrors_and_cordons.cpp: a drain for Kubernetes node trouble (Rule::kNodeTrouble).
std::string NodeTroubleDrainNotDue(const SlurmNode& live);
// mirrors_and_cordons.cpp: a kSetTopology (never sent for a unit the node holds).
std::string TopologyNotDue(const Action& action, const SlurmNode& live);
// pod_faults.cpp: a kFail of any pod rule.
std::string FailNotDue(const Action& action, const SlurmNode& live);
// breakers_and_returns.cpp: a breaker's drain (Rule::kBreaker), a kResume, a
// kRenewPowerDown.
std::string BreakerDrainNotDue(const SlurmNode& live);
std::string ResumeNotDue(const SlurmNode& live, Clock::Wall::time_point wall);
std::string RenewPowerDownNotDue(const SlurmNode& live);
// rollouts.cpp: a kReboot, and the kDeletePod (Rule::kReboot) or kRecreatePod of
// the reboot Slurm issued.
std::string RebootNotDue(const SlurmNode& live);
std::string RebootPodNotDue(const Action& action, const SlurmNode& live);

}  // namespace k8sbridge::sync
