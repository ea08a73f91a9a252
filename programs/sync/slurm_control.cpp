#include "slurm_control.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

namespace k8sbridge::sync {

namespace {

std::string LastSlurmError() {
  const int err = errno;  // libslurm reports its errors through errno (24.11)
  return fmt::format("{} (errno {})", slurm_strerror(err), err);
}

SlurmNode Convert(const node_info_t& info) {
  SlurmNode n;
  n.name = info.name ? info.name : "";
  n.features = info.features ? info.features : "";
  n.features_act = info.features_act ? info.features_act : "";
  const uint32_t state = info.node_state;
  switch (state & NODE_STATE_BASE) {
    case NODE_STATE_DOWN:
      n.base = SlurmNode::Base::kDown;
      break;
    case NODE_STATE_IDLE:
      n.base = SlurmNode::Base::kIdle;
      break;
    case NODE_STATE_ALLOCATED:
      n.base = SlurmNode::Base::kAllocated;
      break;
    case NODE_STATE_ERROR:
      n.base = SlurmNode::Base::kError;
      break;
    case NODE_STATE_MIXED:
      n.base = SlurmNode::Base::kMixed;
      break;
    case NODE_STATE_FUTURE:
      n.base = SlurmNode::Base::kFuture;
      break;
    default:
      n.base = SlurmNode::Base::kUnknown;
  }
  n.drain = state & NODE_STATE_DRAIN;
  n.cloud = state & NODE_STATE_CLOUD;
  n.powered_down = state & NODE_STATE_POWERED_DOWN;
  n.powering_up = state & NODE_STATE_POWERING_UP;
  n.powering_down = state & NODE_STATE_POWERING_DOWN;
  n.power_down = state & NODE_STATE_POWER_DOWN;
  n.not_responding = state & NODE_STATE_NO_RESPOND;
  n.fail = state & NODE_STATE_FAIL;
  n.reason = info.reason ? info.reason : "";
  n.reason_time = info.reason_time;
  return n;
}

}  // namespace

LibslurmControl::LibslurmControl() {
  // Reads slurm.conf (SLURM_CONF, else the compiled-in path).
  slurm_init(nullptr);
}

std::string LibslurmControl::UserName(uint32_t uid) {
  if (uid == NO_VAL || uid == 0xfffffffe)
    return "";
  auto it = users_.find(uid);
  if (it != users_.end())
    return it->second;
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  std::string name = std::to_string(uid);
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
    name = found->pw_name;
  users_.emplace(uid, name);
  return name;
}

Result<std::vector<SlurmNode>> LibslurmControl::LoadNodes() {
  std::lock_guard lock(load_mu_);
  node_info_msg_t* msg = nullptr;
  // With the time of our copy, slurmctld answers SLURM_NO_CHANGE_IN_DATA (cheap)
  // unless a node changed since.
  if (slurm_load_node(last_update_, &msg, SHOW_ALL) != SLURM_SUCCESS) {
    if (errno == SLURM_NO_CHANGE_IN_DATA && last_update_ != 0)
      return nodes_;
    return Status::Unavailable(fmt::format("slurm_load_node: {}", LastSlurmError()));
  }
  if (!msg)
    return Status::Unavailable("slurm_load_node answered nothing");
  std::vector<SlurmNode> nodes;
  nodes.reserve(msg->record_count);
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& info = msg->node_array[i];
    if (!info.name)
      continue;
    nodes.push_back(FromInfo(info));
  }
  last_update_ = msg->last_update;
  slurm_free_node_info_msg(msg);
  nodes_ = nodes;
  return nodes;
}

SlurmNode LibslurmControl::FromInfo(const node_info_t& info) {
  SlurmNode n = Convert(info);
  n.reason_user = n.reason.empty() ? "" : UserName(info.reason_uid);
  return n;
}

Result<SlurmNode> LibslurmControl::LoadNode(std::string_view node) {
  // Its own RPC, not the change-detected copy: the executor must see slurmctld's
  // state now. Shares load_mu_ for users_ (getpwuid cache).
  std::lock_guard lock(load_mu_);
  std::string name(node);
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS) {
    return Status::Unavailable(
        fmt::format("slurm_load_node_single({}): {}", node, LastSlurmError()));
  }
  Result<SlurmNode> out = Status::NotFound(fmt::format("Slurm has no node {}", node));
  for (uint32_t i = 0; msg && i < msg->record_count; ++i) {
    const node_info_t& info = msg->node_array[i];
    if (info.name && node == info.name)
      out = FromInfo(info);
  }
  slurm_free_node_info_msg(msg);
  return out;
}

Status LibslurmControl::Update(std::string_view node, uint32_t state, std::string_view reason,
                               std::string_view what) {
  std::string names(node);
  std::string text(reason);
  update_node_msg_t msg;
  slurm_init_update_node_msg(&msg);
  msg.node_names = names.data();
  msg.node_state = state;
  if (!text.empty()) {
    msg.reason = text.data();
    msg.reason_uid = static_cast<uint32_t>(getuid());
  }
  if (slurm_update_node(&msg) != SLURM_SUCCESS) {
    return Status::Unavailable(
        fmt::format("slurm_update_node(NodeName={} State={}): {}", node, what, LastSlurmError()));
  }
  return Status::Ok();
}

Status LibslurmControl::Drain(std::string_view node, std::string_view reason) {
  std::lock_guard lock(update_mu_);
  return Update(node, NODE_STATE_DRAIN, reason, "DRAIN");
}

Status LibslurmControl::Undrain(std::string_view node) {
  std::lock_guard lock(update_mu_);
  // UNDRAIN clears the DRAIN flag only: a node that is DOWN for another reason stays so.
  return Update(node, NODE_STATE_UNDRAIN, "", "UNDRAIN");
}

Status LibslurmControl::DownAndPowerDown(std::string_view node, std::string_view reason) {
  std::lock_guard lock(update_mu_);
  // DOWN first: its jobs requeue at once. Then POWER_DOWN: the node goes to
  // POWERED_DOWN after SuspendTimeout, still DOWN (down~) in Slurm 24.11, until
  // k8sbridge-sync returns it to service (Resume); its next resume makes a fresh
  // pod. An empty reason (the node keeps an admin's) is not sent: slurmctld needs
  // none for DOWN through the API, and keeps the node's reason and reason_uid.
  if (Status s = Update(node, NODE_STATE_DOWN, reason, "DOWN"); !s.ok())
    return s;
  return Update(node, NODE_STATE_POWER_DOWN, reason, "POWER_DOWN");
}

Status LibslurmControl::Resume(std::string_view node) {
  std::lock_guard lock(update_mu_);
  // On a DOWN node slurmctld makes it IDLE and clears DRAIN and FAIL; the power
  // flags stay (POWERED_DOWN), so Slurm resumes it when a job needs it.
  return Update(node, NODE_RESUME, "", "RESUME");
}

Status LibslurmControl::UpdateFeatures(std::string_view node, std::string_view available,
                                       std::string_view active) {
  std::lock_guard lock(update_mu_);
  std::string names(node), features(available), features_act(active);
  update_node_msg_t msg;
  slurm_init_update_node_msg(&msg);
  msg.node_names = names.data();
  msg.features = features.data();
  msg.features_act = features_act.data();
  if (slurm_update_node(&msg) != SLURM_SUCCESS) {
    return Status::Unavailable(
        fmt::format("slurm_update_node(NodeName={} Features={} "
                    "ActiveFeatures={}): {}",
                    node, available, active, LastSlurmError()));
  }
  return Status::Ok();
}

}  // namespace k8sbridge::sync
