#include "slurm_nodes.h"

#include <unistd.h>

#include <cerrno>
#include <optional>

#include <fmt/format.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "k8sbridge/slurm/node_reason.h"

namespace k8sbridge::power {

namespace {

std::string LastSlurmError() {
  const int err = errno;  // libslurm reports its errors through errno (24.11)
  return fmt::format("{} (errno {})", slurm_strerror(err), err);
}

// What this program needs of one node, read live: its Gres, and whether it is
// already out of service with a reason of someone else's (node_reason.h).
struct LiveNode {
  std::string gres;
  bool out_of_service = false;  // DOWN, DRAIN or FAIL
  std::string reason;
};

Result<LiveNode> LoadLiveNode(std::string_view node) {
  std::string name(node);
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) {
    return Status::Unavailable(
        fmt::format("slurm_load_node_single({}): {}", node, LastSlurmError()));
  }
  std::optional<LiveNode> found;
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& info = msg->node_array[i];
    if (!info.name || node != info.name)
      continue;
    LiveNode live;
    live.gres = info.gres && std::string_view(info.gres) != "(null)" ? info.gres : "";
    const uint32_t state = info.node_state;
    live.out_of_service = (state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
                          (state & (NODE_STATE_DRAIN | NODE_STATE_FAIL)) != 0;
    live.reason = info.reason ? info.reason : "";
    found = std::move(live);
  }
  slurm_free_node_info_msg(msg);
  if (!found)
    return Status::NotFound(fmt::format("slurmctld does not know node {}", node));
  return *found;
}

}  // namespace

void LibslurmNodes::Init() {
  // Reads slurm.conf (SLURM_CONF, else the compiled-in path): slurmscriptd runs us
  // with slurmctld's environment, so this is the controller's own configuration.
  std::call_once(init_, [] { slurm_init(nullptr); });
}

Result<std::string> LibslurmNodes::ControllerMungeSocket() {
  Init();
  std::lock_guard lock(mu_);
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS || !conf)
    return Status::Unavailable(fmt::format("slurm_load_ctl_conf: {}", LastSlurmError()));
  std::string authinfo = conf->authinfo ? conf->authinfo : "";
  slurm_free_ctl_conf(conf);
  // "socket=/run/munge/munge.socket.2,ttl=300": comma-separated key=value.
  std::string_view rest = authinfo;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.starts_with("socket="))
      return std::string(item.substr(7));
    if (comma == std::string_view::npos)
      break;
    rest.remove_prefix(comma + 1);
  }
  return std::string();
}

Result<std::string> LibslurmNodes::Gres(std::string_view node) {
  Init();
  std::lock_guard lock(mu_);
  auto live = LoadLiveNode(node);
  if (!live.ok())
    return live.status();
  return live->gres;
}

Status LibslurmNodes::FailNode(std::string_view node, std::string_view reason) {
  Init();
  std::lock_guard lock(mu_);
  // Read right before writing: a node an admin (or Slurm) already took out of
  // service keeps that reason and its author; only the state changes. A node that
  // cannot be read is still failed with our reason: leaving it POWERING_UP until
  // ResumeTimeout is worse than replacing a reason we could not see.
  auto live = LoadLiveNode(node);
  const bool keep =
      live.ok() && ReasonPolicy(live->out_of_service, live->reason) == ReasonWrite::kKeep;
  std::string names(node);
  std::string text(reason);
  // DOWN first: its jobs requeue at once. Then POWER_DOWN: the node goes back to
  // POWERED_DOWN after SuspendTimeout instead of waiting for ResumeTimeout.
  for (uint32_t state :
       {static_cast<uint32_t>(NODE_STATE_DOWN), static_cast<uint32_t>(NODE_STATE_POWER_DOWN)}) {
    update_node_msg_t msg;
    slurm_init_update_node_msg(&msg);
    msg.node_names = names.data();
    msg.node_state = state;
    if (!keep) {
      msg.reason = text.data();
      msg.reason_uid = static_cast<uint32_t>(getuid());
    }
    if (slurm_update_node(&msg) != SLURM_SUCCESS) {
      return Status::Unavailable(fmt::format("slurm_update_node(NodeName={} State={}): {}", node,
                                             state == NODE_STATE_DOWN ? "DOWN" : "POWER_DOWN",
                                             LastSlurmError()));
    }
  }
  return Status::Ok();
}

}  // namespace k8sbridge::power
