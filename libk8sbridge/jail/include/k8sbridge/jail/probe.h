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

// What a probe found: the step that failed (0 none, 1 stat(jail), 2 open(probe),
// 3 read(probe)) and its errno.
struct ProbeReport {
  int stage;
  int err;
};

// The probe itself, in the calling process: async-signal-safe, no allocation,
// and it blocks for as long as the jail does. Callers run it where a hang
// cannot hold up a step (a prober process, the job namespace holder).
ProbeReport ProbeFiles(const char* jail, const char* probe_path);

// The report as a status whose message names the jail and probe file and says
// what to do.
Status ProbeResult(const std::string& jail, const std::string& probe_path, ProbeReport report);

// OK when `jail`/`probe_rel` can be opened and read within `timeout`.
// NotFound when it is missing (an unmounted jail shows an empty directory),
// Timeout when the jail does not answer in time.
Status ProbeJail(const std::string& jail, const std::string& probe_rel,
                 std::chrono::milliseconds timeout);

}  // namespace k8sbridge::jail
