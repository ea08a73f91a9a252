// The one implementation of the Slurm port over Slurm's C API. Its functions come
// in a table, so the same code serves programs (libslurm's functions, linked), code
// inside a Slurm daemon (the daemon's own, looked up at run time) and its unit test
// (fakes). It includes Slurm's headers: only for k8sbridge_libslurm,
// k8sbridge_daemon_slurm_src and tests/unit/slurm.
#pragma once

#include <ctime>
#include <functional>
#include <memory>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "k8sbridge/slurm/port.h"

namespace k8sbridge::slurm {

struct SlurmApi {
  // Called once, before the first RPC; null where the daemon has done it already.
  void (*init)(const char* conf) = nullptr;
  int (*load_node)(time_t update_time, node_info_msg_t** resp, uint16_t show_flags) = nullptr;
  int (*load_node_single)(node_info_msg_t** resp, char* node_name, uint16_t show_flags) = nullptr;
  void (*free_node_info_msg)(node_info_msg_t* msg) = nullptr;
  void (*init_update_node_msg)(update_node_msg_t* msg) = nullptr;
  int (*update_node)(update_node_msg_t* msg) = nullptr;
  int (*load_ctl_conf)(time_t update_time, slurm_conf_t** conf) = nullptr;
  void (*free_ctl_conf)(slurm_conf_t* conf) = nullptr;
  char* (*strerror)(int errnum) = nullptr;
  // Slurm::Reboot: scontrol for programs; empty inside a daemon (Unimplemented).
  std::function<Status(std::string_view node, std::string_view reason)> reboot_asap;
};

std::unique_ptr<Slurm> NewApiSlurm(const SlurmApi& api);

}  // namespace k8sbridge::slurm
