// Whose reason a Slurm node carries, and what a k8sbridge drain or DOWN may do
// with it. Every component that drains or downs a node (spank_jail,
// k8sbridge-health, k8sbridge-power, k8sbridge-sync) asks ReasonPolicy on a fresh
// read of the node right before it writes: a reason k8sbridge did not write (an
// admin's, or Slurm's own such as "Not responding" or "Epilog error") is never
// replaced, and its author (reason_uid) stays with it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace k8sbridge {

// True when a k8sbridge component wrote `reason`.
bool IsK8sbridgeReason(std::string_view reason);

// The reason slurmctld writes when a node registers with a boot time later than its
// last response (node_mgr.c validate_node_specs, with ReturnToService 0 or 1). On a
// CLOUD node of a node group every pod start is a boot, so once Slurm has powered
// such a node down and its pod is gone, nothing of the "reboot" is left to look at.
inline constexpr std::string_view kSlurmRebootReason = "Node unexpectedly rebooted";

enum class ReasonWrite {
  kWrite,  // send k8sbridge's reason with the state change
  kKeep,   // send the state change without a reason: the node's own reason stays
};

// A node that is already out of service (DOWN, DRAIN or FAIL) with a reason that
// k8sbridge did not write keeps it. Otherwise (in service, no reason, or a reason
// of k8sbridge's) k8sbridge's reason is written.
ReasonWrite ReasonPolicy(bool out_of_service, std::string_view current_reason);

// The most bytes of a reason BridgeReason writes. slurmctld keeps a reason of any
// length, but sinfo and `scontrol show node` show it on one line, so it names the
// cause in short; the full text goes to the writer's log.
inline constexpr size_t kMaxBridgeReason = 200;

// The reason k8sbridge-power and k8sbridge-sync write: contract::kBridgeReasonPrefix,
// a space, then `text` on one line (line breaks and tabs become spaces). A longer
// one than kMaxBridgeReason bytes is cut on a UTF-8 character boundary (a
// Kubernetes message may hold any character) and ends in "...".
std::string BridgeReason(std::string_view text);

}  // namespace k8sbridge
