// The one recording fake of the Slurm port (k8sbridge/slurm/port.h), for the unit
// tests of every layer that talks to Slurm. It applies each call to its nodes the way
// slurmctld would (roughly), follows the port's reason rule (ReasonPolicyFor), and
// records the calls in one format:
//   "drain w-0 <reason>"  "undrain w-0"  "fail w-0 <reason>" ("fail w-0" without one)
//   "return w-0"  "power_down w-0"  "features w-0 <available> <active>"  "reboot w-0 <reason>"
// A drain the reason rule refuses is not recorded (nothing reaches Slurm).
//
// Which nodes exist: after SetNodes, exactly those (any other name is NotFound, as
// slurmctld answers). Before it, any name is an IDLE node with no reason, made when
// first named (tests of programs that act on whatever hostlist Slurm passes).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/slurm/port.h"

namespace k8sbridge::slurm {

class RecordingSlurm final : public Slurm {
 public:
  RecordingSlurm() = default;
  explicit RecordingSlurm(std::vector<Node> nodes) { SetNodes(std::move(nodes)); }

  Result<std::vector<Node>> LoadNodes() override;
  Result<Node> LoadNode(std::string_view node) override;
  Status Drain(std::string_view node, std::string_view reason) override;
  Status Undrain(std::string_view node) override;
  Status Fail(std::string_view node, std::string_view reason) override;
  // Records "return w-0": a DOWN node becomes IDLE, DRAIN and FAIL cleared; the
  // reason stays, as slurmctld keeps it.
  Status ReturnToService(std::string_view node) override;
  // Records "power_down w-0": POWER_DOWN set; a powered-down node is no longer
  // NOT_RESPONDING (what its power-down cycle ends with).
  Status PowerDown(std::string_view node) override;
  // Records "reboot w-0 <reason>" and sets reboot_requested and DRAIN, as slurmctld.
  Status Reboot(std::string_view node, std::string_view reason) override;
  Status SetFeatures(std::string_view node, std::string_view available,
                     std::string_view active) override;
  // As a Slurm of 25.05+ unless SetTopologyUpdates(false) (24.11).
  bool SupportsTopologyUpdate() const override { return topology_updates_; }
  // Records "topology w-0 <topology>" and sets the node's topology.
  Status SetTopology(std::string_view node, std::string_view topology) override;
  Result<std::string> MungeSocket() override;
  Result<Timeouts> LoadTimeouts() override;

  // The nodes as slurmctld has them now (what LoadNode and LoadNodes answer).
  void SetNodes(std::vector<Node> nodes);
  // The node's Gres (made if unknown, even after SetNodes).
  void SetGres(std::string_view node, std::string gres);
  void SetTopologyUpdates(bool supported) { topology_updates_ = supported; }
  void SetMungeSocket(std::string socket) { munge_socket_ = std::move(socket); }
  void SetTimeouts(Timeouts timeouts) { timeouts_ = timeouts; }
  // nullptr if unknown. The pointer stays valid until the next SetNodes.
  Node* Find(std::string_view node);
  // Every read fails (Unavailable), as when slurmctld does not answer.
  void FailLoads(bool fail) { fail_loads_ = fail; }
  std::vector<std::string> calls() const;
  // node -> reason of each node that got a "fail" call (the last one).
  std::map<std::string, std::string> failed() const;

 private:
  Node* FindLocked(std::string_view node);  // mu_ held; makes it if allowed
  // Records `call` and applies `change` to `node` (NotFound if there is none).
  Status Apply(std::string call, std::string_view node, const std::function<void(Node&)>& change);
  mutable std::mutex mu_;
  std::vector<Node> nodes_;
  bool fixed_nodes_ = false;  // SetNodes was called
  std::vector<std::string> calls_;
  std::map<std::string, std::string> failed_;
  std::string munge_socket_;
  Timeouts timeouts_{std::chrono::seconds(60), std::chrono::seconds(0)};  // Slurm's defaults
  bool fail_loads_ = false;
  bool topology_updates_ = true;
};

}  // namespace k8sbridge::slurm
