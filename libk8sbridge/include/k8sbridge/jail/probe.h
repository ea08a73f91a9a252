// Is the jail there and answering? A jail on a hung NFS server blocks any
// process that touches it in uninterruptible sleep, so the check runs in a
// separate process and the caller waits for its answer only until a deadline.
// A prober that hangs is left behind (it cannot be killed while the server is
// gone) and reaped by a later probe; the step and slurmstepd never block on it.
#pragma once

#include <chrono>
#include <string>

#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// OK when `jail`/`probe_rel` can be opened and read within `timeout`.
// NotFound when it is missing (an unmounted jail shows an empty directory),
// Timeout when the jail does not answer in time.
Status ProbeJail(const std::string& jail, const std::string& probe_rel,
                 std::chrono::milliseconds timeout);

}  // namespace k8sbridge::jail
