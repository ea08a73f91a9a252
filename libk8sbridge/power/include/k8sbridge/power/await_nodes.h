// What k8sbridge-prolog (slurm.conf's PrologSlurmctld) does: wait until the nodes of
// a job that Slurm is resuming are up, then end, so the job starts at once.
//
// Why: a job allocated powered-down nodes is CONFIGURING while they boot. Slurm
// 24.11 and 26.05 end CONFIGURING in two places only: job_time_limit(), run every
// PERIODIC_TIMEOUT (30 s, compiled in) by slurmctld's background thread, and
// prolog_running_decr() when the job's PrologSlurmctld ends, which tests the nodes
// and launches the batch script at once (src/slurmctld/job_scheduler.c). Without a
// PrologSlurmctld that ends when the nodes are up, a job waits up to 30 s after its
// last slurmd registered. docs/power.md, "Start as soon as the nodes are up".
//
// "Up" is Slurm's own test (select_p_job_ready): neither POWERED_DOWN nor
// POWERING_UP. The wait never fails a job: whatever happens, it ends and the
// prolog exits 0, and Slurm's own checks (ResumeTimeout, the periodic test) decide.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

enum class AwaitOutcome {
  kUp,          // every node is up: the job starts now
  kNodeDown,    // a node went DOWN (resume failed or timed out): Slurm requeues the job
  kTimedOut,    // the limit passed first
  kUnreadable,  // Slurm could not be read (the limit passed while it failed)
};
std::string_view AwaitOutcomeName(AwaitOutcome outcome);

struct AwaitOptions {
  Clock::Steady::duration poll_interval = std::chrono::milliseconds(200);
  Clock::Steady::duration limit = std::chrono::seconds(90);
};

struct AwaitReport {
  AwaitOutcome outcome = AwaitOutcome::kUp;
  std::string node;   // the node that was down, or not up at the limit
  Status last_error;  // kUnreadable: the last read's error
  int reads = 0;      // Slurm RPCs made
  Clock::Steady::duration waited{};
};

// The longest the wait may take: ResumeTimeout plus a margin (by then Slurm has
// set a node that did not come up DOWN), and less than PrologEpilogTimeout when one
// is set (a prolog that times out requeues the job). Slurm's defaults (60 s, none)
// when the timeouts cannot be read.
Clock::Steady::duration AwaitLimit(const Result<slurm::Timeouts>& timeouts);

// One read of every node (LoadNodes) finds those not yet up; then each of them in
// turn is read alone (LoadNode) until it is up, so a job on nodes that are already
// up costs one RPC, and a large job's wait costs one RPC per node plus one per poll.
AwaitReport AwaitNodesUp(slurm::Slurm& slurm, Clock& clock, const std::vector<std::string>& nodes,
                         const AwaitOptions& options);

}  // namespace k8sbridge::power
