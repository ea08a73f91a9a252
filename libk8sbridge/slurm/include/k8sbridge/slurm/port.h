// The Slurm port: every read and write of Slurm's nodes that k8sbridge makes goes
// through slurm::Slurm. Two implementations speak Slurm's API, both in this
// directory and nowhere else:
//  - NewLibslurm() (libslurm.h), for programs, which link libslurm;
//  - NewDaemonSlurm() (daemon.h), for code loaded into a Slurm daemon (spank_jail),
//    which looks Slurm's symbols up in the daemon at run time and links nothing.
// Tests use the recording fake in tests/fakes/recording_slurm.h.
//
// One rule for every drain and DOWN (ReasonPolicy in node_reason.h): right before
// it writes, the port reads the node live; a node already out of service with a
// reason k8sbridge did not write keeps that reason and its author. Slurm records
// the author itself (the RPC's authenticated user), so no caller sets reason_uid.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/contract.h"
#include "k8sbridge/slurm/node_reason.h"
#include "k8sbridge/status.h"

namespace k8sbridge::slurm {

// A Slurm node as slurm_load_node reports it; the flags are re-derived from
// node_state (Slurm's IS_NODE_* macros are internal to Slurm).
struct Node {
  enum class Base { kUnknown, kDown, kIdle, kAllocated, kError, kMixed, kFuture };
  std::string name;
  Base base = Base::kUnknown;
  bool drain = false;          // DRAIN flag: drained or draining
  bool cloud = false;          // CLOUD flag
  bool powered_down = false;   // ~
  bool powering_up = false;    // #
  bool powering_down = false;  // %
  bool power_down = false;     // ! (power down requested)
  bool power_up = false;       // power up requested (`scontrol power up`)
  bool not_responding = false;
  bool fail = false;              // FAIL flag (failing: DOWN once its jobs end)
  bool reboot_requested = false;  // a reboot waits for the node to be idle (@)
  bool reboot_issued = false;     // Slurm sent the reboot; DOWN until slurmd registers anew
  std::string reason;
  std::string reason_user;             // "" if unknown
  int64_t reason_time = 0;             // seconds since the epoch; 0 if none
  std::string features, features_act;  // available and active, comma-separated
  std::string gres;                    // "gpu:h100:8"; "" when it has none
  // Slurm 25.05+: the units a node update or slurm.conf's Topology= gave it
  // ("fabric:k8s1-leaf-0"); "" where only the topology file places it, and on 24.11.
  std::string topology;

  // "IDLE", "DOWN", ... for metrics.
  std::string_view BaseName() const;
  bool Down() const { return base == Base::kDown; }
  // The reason is k8sbridge-sync's ("k8sbridge: ...").
  bool OwnedReason() const {
    return std::string_view(reason).starts_with(contract::kBridgeReasonPrefix);
  }
  // DOWN, DRAIN or FAIL: what ReasonPolicy calls out of service.
  bool OutOfService() const { return Down() || drain || fail; }
  // Slurm is suspending it or has (POWER_DOWN, POWERING_DOWN or POWERED_DOWN).
  bool Suspending() const { return power_down || powering_down || powered_down; }
  friend bool operator==(const Node&, const Node&) = default;
};

// What a drain or DOWN sends with its state change, given a live read of the node
// (or the error reading it). A node that cannot be read gets k8sbridge's reason:
// leaving a broken node in service is worse than replacing a reason we could not see.
ReasonWrite ReasonPolicyFor(const Result<Node>& live);

// The NodeAddr that Fail gives a node whose slurmd never registered, with the
// POWER_DOWN that ends its POWERING_UP. On a DOWN node that POWER_DOWN clears
// POWERING_UP, and until the power-save thread's next pass starts the suspend the
// node is DOWN with no boot time outside every POWER* state: ping_nodes puts it in a
// registration agent's list (slurmctld/ping_nodes.c). Its NodeAddr is still its
// name, which a worker pod's node cannot resolve, and Slurm up to 24.11.6 (and
// 25.05.3) corrupts its heap when it drops an unresolvable name from such a list
// (forward.c _get_alias_addrs, hostlist.c hostlist_remove): slurmctld segfaults.
// An IPv4 literal always resolves, and a TCP connect to the broadcast address fails
// at once on every Linux host (ENETUNREACH), slurmctld's or a forwarding slurmd's;
// loopback would reach a forwarding slurmd itself. The address is gone again once
// the node is POWERED_DOWN (slurmctld resets a CLOUD node's NodeAddr to its name)
// or its next slurmd registers (slurmctld takes the registration's source address).
inline constexpr std::string_view kUnreachableNodeAddr = "255.255.255.255";

// How Fail takes a node out of service, decided on a live read of it.
struct FailPlan {
  ReasonWrite reason = ReasonWrite::kWrite;  // as ReasonPolicyFor
  // NodeAddr to send with POWER_DOWN; empty: leave it. kUnreachableNodeAddr for a
  // CLOUD node that is POWERING_UP; never for a node that cannot be read (it may
  // not be a CLOUD node, whose NodeAddr slurmctld would never reset).
  std::string_view node_addr;
};
FailPlan FailPlanFor(const Result<Node>& live);

// slurm.conf's timeouts as slurmctld has them; zero where unset.
struct Timeouts {
  std::chrono::seconds resume{0};  // ResumeTimeout
  // PrologEpilogTimeout (24.11) or PrologTimeout (26.05); 0: none, Slurm waits
  std::chrono::seconds prolog_epilog{0};
};

class Slurm {
 public:
  virtual ~Slurm() = default;
  // Every node. The libslurm implementation asks slurmctld for changes since its
  // last answer and returns its copy when there are none; an error means Slurm
  // could not be read (nothing destructive may follow).
  virtual Result<std::vector<Node>> LoadNodes() = 0;
  // As LoadNodes, but nullopt when slurmctld had no change since the last answer:
  // a poller then skips the copy and the compare of every node (at 10,000 nodes,
  // most of an idle poll's cost). By default every answer counts as a change.
  virtual Result<std::optional<std::vector<Node>>> LoadChangedNodes() {
    auto nodes = LoadNodes();
    if (!nodes.ok())
      return nodes.status();
    return std::optional<std::vector<Node>>(std::move(*nodes));
  }
  // One node, read live from slurmctld now (never a cached copy). NotFound if
  // Slurm has none of that name.
  virtual Result<Node> LoadNode(std::string_view node) = 0;
  // DRAIN with `reason`. A node out of service with a reason that is not
  // k8sbridge's is left as it is: AlreadyExists, nothing sent.
  virtual Status Drain(std::string_view node, std::string_view reason) = 0;
  // UNDRAIN: clears the DRAIN flag only; a node DOWN for another reason stays DOWN.
  virtual Status Undrain(std::string_view node) = 0;
  // DOWN (its jobs requeue at once), then POWER_DOWN (Slurm powers it down and the
  // next resume makes a fresh pod). The state changes are always sent; `reason` goes
  // with them unless ReasonPolicyFor keeps the node's own, or `reason` is empty. A
  // CLOUD node still POWERING_UP gets kUnreachableNodeAddr with the POWER_DOWN
  // (FailPlanFor).
  virtual Status Fail(std::string_view node, std::string_view reason) = 0;
  // IDLE (`scontrol update state=idle`): a DOWN, POWERED_DOWN node becomes
  // IDLE+POWERED_DOWN, so the next job that needs it resumes it. Not RESUME: on a
  // DOWN node slurmctld's RESUME also marks it NOT_RESPONDING until its slurmd
  // registers (node_mgr.c, _require_node_reg), and a restarted slurmctld does not
  // make an idle node that is NOT_RESPONDING available (read_config.c): a powered-down
  // one then never registers, and every job that needs it waits for ever.
  virtual Status ReturnToService(std::string_view node) = 0;
  // POWER_DOWN (`scontrol update state=power_down`): Slurm powers the node down once
  // it is idle; one already powered down goes through the power-down again (its
  // SuspendProgram runs, and after SuspendTimeout it is POWERED_DOWN and available,
  // its NOT_RESPONDING cleared).
  virtual Status PowerDown(std::string_view node) = 0;
  // `scontrol reboot ASAP nextstate=RESUME reason=<reason> <node>`: Slurm drains the
  // node, waits until its jobs end, issues the reboot (DOWN + REBOOT_ISSUED) and
  // returns it to service when its slurmd registers with a new boot time. libslurm
  // has no public call for it: programs run scontrol (from PATH); a plugin cannot.
  virtual Status Reboot(std::string_view node, std::string_view reason) = 0;
  // Available and active features (features / features_act).
  virtual Status SetFeatures(std::string_view node, std::string_view available,
                             std::string_view active) = 0;
  // Whether this Slurm takes SetTopology (25.05+, update_node_msg_t.topology_str).
  virtual bool SupportsTopologyUpdate() const = 0;
  // `scontrol update NodeName=<node> Topology=<topology>` ("fabric:k8s1-leaf-0"): the
  // node's unit in that topology, created if needed. Internal where
  // SupportsTopologyUpdate() is false.
  virtual Status SetTopology(std::string_view node, std::string_view topology) = 0;
  // The munged socket slurmctld uses (AuthInfo=socket=...); "" when it names none
  // (libmunge's default).
  virtual Result<std::string> MungeSocket() = 0;
  // ResumeTimeout and the PrologSlurmctld timeout (slurm_load_ctl_conf).
  virtual Result<Timeouts> LoadTimeouts() = 0;
};

// The message of Drain's AlreadyExists, for the implementations.
std::string ForeignReasonKept(std::string_view node, std::string_view reason);

}  // namespace k8sbridge::slurm
