// One health-check run: every configured check, each under the watchdog, with
// the kernel-log cursor carried from the previous run in `state`.
#pragma once

#include <optional>

#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/config.h"
#include "k8sbridge/health/findings.h"
#include "k8sbridge/health/outcome.h"

namespace k8sbridge::health {

Report RunChecks(const HealthConfig& config, std::optional<unsigned> expected_gpus,
                 HealthState& state);

// Kernel-log XIDs after state's cursor (all of them on a first run), advancing it.
// `path` is /dev/kmsg, or a plain file of records for tests.
std::vector<KernelXid> ReadKernelXids(const std::string& path, HealthState& state);

}  // namespace k8sbridge::health
