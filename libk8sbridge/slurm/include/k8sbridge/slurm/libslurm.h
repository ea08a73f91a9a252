// The Slurm port through libslurm, for programs (k8sbridge-power, -sync, -health):
// link k8sbridge_libslurm_dep. Never for a plugin: a plugin loaded into a Slurm
// daemon uses daemon.h, because it must not link libslurm.
#pragma once

#include <memory>

#include "k8sbridge/slurm/port.h"

namespace k8sbridge::slurm {

// slurm_init (slurm.conf from SLURM_CONF, else the compiled-in path) runs before
// the first call, not here: a program that never reaches Slurm never reads it.
std::unique_ptr<Slurm> NewLibslurm();

}  // namespace k8sbridge::slurm
