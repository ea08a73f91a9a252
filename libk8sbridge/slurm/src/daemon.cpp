#include "k8sbridge/slurm/daemon.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include "k8sbridge/slurm/api.h"

namespace k8sbridge::slurm {

namespace {

// Fills `fn` with the daemon's `name`, or adds the name to `missing`.
template <typename Fn>
void Bind(Fn& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
  if (fn == nullptr)
    missing += missing.empty() ? name : fmt::format(", {}", name);
}

}  // namespace

Result<std::unique_ptr<Slurm>> NewDaemonSlurm() {
  SlurmApi api;  // api.init stays null: the daemon has read its configuration
  std::string missing;
  Bind(api.load_node, "slurm_load_node", missing);
  Bind(api.load_node_single, "slurm_load_node_single", missing);
  Bind(api.free_node_info_msg, "slurm_free_node_info_msg", missing);
  Bind(api.init_update_node_msg, "slurm_init_update_node_msg", missing);
  Bind(api.update_node, "slurm_update_node", missing);
  Bind(api.load_ctl_conf, "slurm_load_ctl_conf", missing);
  // 26.05 renamed slurm_free_ctl_conf() to slurm_free_conf().
  Bind(api.free_ctl_conf,
       SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0) ? "slurm_free_conf"
                                                           : "slurm_free_ctl_conf",
       missing);
  Bind(api.strerror, "slurm_strerror", missing);
  if (!missing.empty()) {
    return Status::Unavailable(fmt::format(
        "this process lacks Slurm's {} (the port works only inside a Slurm daemon)", missing));
  }
  return NewApiSlurm(api);
}

}  // namespace k8sbridge::slurm
