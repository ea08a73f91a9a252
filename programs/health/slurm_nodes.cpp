#include "slurm_nodes.h"

#include <cerrno>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <fmt/format.h>

namespace k8sbridge::health {
namespace {

Status SlurmError(std::string_view what) {
  int err = errno;  // libslurm reports its errors through errno (24.11)
  return Status::Unavailable(fmt::format("{}: {}", what, slurm_strerror(err)));
}

Status Update(const std::string& name, uint32_t state, const std::string& reason) {
  update_node_msg_t msg;
  slurm_init_update_node_msg(&msg);
  std::string names = name;
  std::string why = reason;
  msg.node_names = names.data();
  msg.node_state = state;
  if (!why.empty())
    msg.reason = why.data();
  if (slurm_update_node(&msg) != SLURM_SUCCESS)
    return SlurmError(fmt::format("slurm_update_node {}", name));
  return Status::Ok();
}

}  // namespace

LibslurmNodes::LibslurmNodes() {
  slurm_init(nullptr);
}
LibslurmNodes::~LibslurmNodes() {
  slurm_fini();
}

Result<SlurmNode> LibslurmNodes::Get(const std::string& name) {
  node_info_msg_t* msg = nullptr;
  std::string n = name;
  if (slurm_load_node_single(&msg, n.data(), SHOW_ALL) != SLURM_SUCCESS)
    return SlurmError(fmt::format("slurm_load_node_single {}", name));
  if (!msg || msg->record_count == 0 || !msg->node_array[0].name) {
    if (msg)
      slurm_free_node_info_msg(msg);
    return Status::NotFound(fmt::format("node {} is not in Slurm's configuration", name));
  }
  const node_info_t& info = msg->node_array[0];
  SlurmNode node;
  node.name = info.name;
  node.drain = (info.node_state & NODE_STATE_DRAIN) != 0;
  node.down = (info.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
              (info.node_state & NODE_STATE_FAIL) != 0;
  node.reason = info.reason ? info.reason : "";
  node.gres = info.gres ? info.gres : "";
  slurm_free_node_info_msg(msg);
  return node;
}

Status LibslurmNodes::Drain(const std::string& name, const std::string& reason) {
  return Update(name, NODE_STATE_DRAIN, reason);
}

Status LibslurmNodes::Resume(const std::string& name) {
  return Update(name, NODE_STATE_UNDRAIN, "");
}

}  // namespace k8sbridge::health
