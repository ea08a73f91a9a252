#include "k8sbridge/slurm/libslurm.h"

#include "k8sbridge/slurm/api.h"

namespace k8sbridge::slurm {

std::unique_ptr<Slurm> NewLibslurm() {
  SlurmApi api;
  api.init = &slurm_init;
  api.load_node = &slurm_load_node;
  api.load_node_single = &slurm_load_node_single;
  api.free_node_info_msg = &slurm_free_node_info_msg;
  api.init_update_node_msg = &slurm_init_update_node_msg;
  api.update_node = &slurm_update_node;
  api.load_ctl_conf = &slurm_load_ctl_conf;
  api.free_ctl_conf = &slurm_free_ctl_conf;
  api.strerror = &slurm_strerror;
  return NewApiSlurm(api);
}

}  // namespace k8sbridge::slurm
