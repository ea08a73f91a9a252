// One health-check run: every configured check, each under the watchdog, with
// the kernel-log cursor carried from the previous run in `state`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

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

// Judges the free space of `path` as the statvfs check reports it (GiB, "123.4")
// against `min_gib`. Text that is not a number is a check error that quotes it,
// never "0 GiB free".
void JudgeFreeSpace(const std::string& path, std::string_view gib_text, double min_gib, Report& r);

}  // namespace k8sbridge::health
