#include "recording_slurm.h"

#include <fmt/format.h>

namespace k8sbridge::slurm {

void RecordingSlurm::SetNodes(std::vector<Node> nodes) {
  std::lock_guard lock(mu_);
  nodes_ = std::move(nodes);
  fixed_nodes_ = true;
}

Node* RecordingSlurm::FindLocked(std::string_view node) {
  for (auto& n : nodes_) {
    if (n.name == node)
      return &n;
  }
  if (fixed_nodes_)
    return nullptr;
  Node made;
  made.name = node;
  made.base = Node::Base::kIdle;
  nodes_.push_back(std::move(made));
  return &nodes_.back();
}

Node* RecordingSlurm::Find(std::string_view node) {
  std::lock_guard lock(mu_);
  return FindLocked(node);
}

void RecordingSlurm::SetGres(std::string_view node, std::string gres) {
  std::lock_guard lock(mu_);
  Node* n = FindLocked(node);
  if (n == nullptr) {
    nodes_.emplace_back();
    n = &nodes_.back();
    n->name = node;
    n->base = Node::Base::kIdle;
  }
  n->gres = std::move(gres);
}

Result<std::vector<Node>> RecordingSlurm::LoadNodes() {
  std::lock_guard lock(mu_);
  if (fail_loads_)
    return Status::Unavailable("slurm_load_node: Unable to contact slurm controller");
  return nodes_;
}

Result<Node> RecordingSlurm::LoadNode(std::string_view node) {
  std::lock_guard lock(mu_);
  if (fail_loads_)
    return Status::Unavailable("slurm_load_node_single: Unable to contact slurm controller");
  if (Node* n = FindLocked(node))
    return *n;
  return Status::NotFound(fmt::format("Slurm has no node {}", node));
}

Status RecordingSlurm::Apply(std::string call, std::string_view node,
                             const std::function<void(Node&)>& change) {
  std::lock_guard lock(mu_);
  calls_.push_back(std::move(call));
  Node* n = FindLocked(node);
  if (n == nullptr)
    return Status::NotFound(fmt::format("no node {}", node));
  change(*n);
  return Status::Ok();
}

Status RecordingSlurm::Drain(std::string_view node, std::string_view reason) {
  if (auto live = LoadNode(node); ReasonPolicyFor(live) == ReasonWrite::kKeep)
    return Status::AlreadyExists(ForeignReasonKept(node, live->reason));
  return Apply(fmt::format("drain {} {}", node, reason), node, [&](Node& n) {
    n.drain = true;
    n.reason = reason;
    n.reason_user = "slurm";
  });
}

Status RecordingSlurm::Undrain(std::string_view node) {
  return Apply(fmt::format("undrain {}", node), node, [](Node& n) {
    n.drain = false;
    n.reason.clear();
    n.reason_user.clear();
  });
}

Status RecordingSlurm::Fail(std::string_view node, std::string_view reason) {
  const bool keep = !reason.empty() && ReasonPolicyFor(LoadNode(node)) == ReasonWrite::kKeep;
  const std::string_view sent = keep ? std::string_view() : reason;
  {
    std::lock_guard lock(mu_);
    failed_[std::string(node)] = std::string(sent);
  }
  std::string call =
      sent.empty() ? fmt::format("fail {}", node) : fmt::format("fail {} {}", node, sent);
  return Apply(std::move(call), node, [&](Node& n) {
    n.base = Node::Base::kDown;
    n.power_down = true;
    if (!sent.empty())  // without one, slurmctld keeps the node's reason
      n.reason = sent;
  });
}

Status RecordingSlurm::ReturnToService(std::string_view node) {
  return Apply(fmt::format("return {}", node), node, [](Node& n) {
    if (n.Down())
      n.base = Node::Base::kIdle;
    n.drain = n.fail = false;
  });
}

Status RecordingSlurm::PowerDown(std::string_view node) {
  return Apply(fmt::format("power_down {}", node), node, [](Node& n) {
    n.power_down = true;
    if (n.powered_down)
      n.not_responding = false;
  });
}

Status RecordingSlurm::Reboot(std::string_view node, std::string_view reason) {
  return Apply(fmt::format("reboot {} {}", node, reason), node, [&](Node& n) {
    n.reboot_requested = true;
    n.drain = true;
    n.reason = std::string(reason);
  });
}

Status RecordingSlurm::SetFeatures(std::string_view node, std::string_view available,
                                   std::string_view active) {
  return Apply(fmt::format("features {} {} {}", node, available, active), node, [&](Node& n) {
    n.features = available;
    n.features_act = active;
  });
}

Status RecordingSlurm::SetTopology(std::string_view node, std::string_view topology) {
  if (!topology_updates_)
    return Status::Internal("this Slurm has no node topology update");
  return Apply(fmt::format("topology {} {}", node, topology), node,
               [&](Node& n) { n.topology = topology; });
}

Result<std::string> RecordingSlurm::MungeSocket() {
  std::lock_guard lock(mu_);
  return munge_socket_;
}

Result<Timeouts> RecordingSlurm::LoadTimeouts() {
  std::lock_guard lock(mu_);
  if (fail_loads_)
    return Status::Unavailable("slurm_load_ctl_conf: Unable to contact slurm controller");
  return timeouts_;
}

std::vector<std::string> RecordingSlurm::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::map<std::string, std::string> RecordingSlurm::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

}  // namespace k8sbridge::slurm
