#include "slurm_nodes.h"

#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

namespace k8sbridge::power {

namespace {

std::string LastSlurmError() {
  const int err = errno;  // libslurm reports its errors through errno (24.11)
  return fmt::format("{} (errno {})", slurm_strerror(err), err);
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
  std::string name(node);
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) {
    return Status::Unavailable(
        fmt::format("slurm_load_node_single({}): {}", node, LastSlurmError()));
  }
  std::string gres;
  bool found = false;
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& info = msg->node_array[i];
    if (info.name && node == info.name) {
      found = true;
      gres = info.gres ? info.gres : "";
      if (gres == "(null)")
        gres.clear();
    }
  }
  slurm_free_node_info_msg(msg);
  if (!found)
    return Status::NotFound(fmt::format("slurmctld does not know node {}", node));
  return gres;
}

Status LibslurmNodes::FailNode(std::string_view node, std::string_view reason) {
  Init();
  std::lock_guard lock(mu_);
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
    msg.reason = text.data();
    msg.reason_uid = static_cast<uint32_t>(getuid());
    if (slurm_update_node(&msg) != SLURM_SUCCESS) {
      return Status::Unavailable(fmt::format("slurm_update_node(NodeName={} State={}): {}", node,
                                             state == NODE_STATE_DOWN ? "DOWN" : "POWER_DOWN",
                                             LastSlurmError()));
    }
  }
  return Status::Ok();
}

}  // namespace k8sbridge::power
