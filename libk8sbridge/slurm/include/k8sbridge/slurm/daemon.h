// The Slurm port inside a Slurm daemon (slurmstepd, slurmd, srun: wherever a
// plugin is loaded). The daemon already carries Slurm's API (libslurmfull), so the
// functions are looked up in it at run time: the plugin links no libslurm, and a
// missing symbol is an error of the call, not a failure to load the plugin.
#pragma once

#include <memory>

#include "k8sbridge/slurm/port.h"

namespace k8sbridge::slurm {

// Unavailable, naming the symbol, when this process lacks one of Slurm's functions.
Result<std::unique_ptr<Slurm>> NewDaemonSlurm();

}  // namespace k8sbridge::slurm
