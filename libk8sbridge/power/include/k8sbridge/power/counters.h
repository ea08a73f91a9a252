// What the power programs did, counted across their runs. Each run of
// k8sbridge-power lives a few seconds under slurmscriptd, so it serves nothing
// itself: it adds its outcome to the file of PowerMetricsFile=, and k8sbridge-sync,
// which runs beside slurmctld, serves the totals as Prometheus metrics (docs/sync.md,
// "Metrics"). Runs overlap (a resume and a suspend at once), so each adds under an
// flock of "<file>.lock"; the file is replaced atomically, so a reader needs no lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge::power {

// The totals of one subcommand (resume, suspend, resume-fail).
struct CallTotals {
  uint64_t calls_ok = 0;      // every node succeeded (exit 0)
  uint64_t calls_failed = 0;  // some node failed (exit 1)
  uint64_t calls_error = 0;   // gave up before any pod was touched (exit 2)
  uint64_t nodes_ok = 0;
  uint64_t nodes_failed = 0;
  double seconds = 0;  // the runs' time, all together
  uint64_t Calls() const { return calls_ok + calls_failed + calls_error; }
  friend bool operator==(const CallTotals&, const CallTotals&) = default;
};

// By subcommand.
using PowerCounters = std::map<std::string, CallTotals>;

// What one run adds: its nodes' outcomes, or that it gave up (`gave_up`: every node
// of the call counts as failed, none was touched).
struct CallOutcome {
  std::string subcommand;
  uint64_t nodes_ok = 0;
  uint64_t nodes_failed = 0;
  bool gave_up = false;
  std::chrono::duration<double> took{0};
};

// The file's text: a version line, then a line per subcommand
// ("resume calls_ok=3 calls_failed=1 calls_error=0 nodes_ok=12 nodes_failed=2 seconds=8.5").
std::string FormatPowerCounters(const PowerCounters& counters);
Result<PowerCounters> ParsePowerCounters(std::string_view text);

// The counts in `path`; a missing file is no counts yet.
Result<PowerCounters> ReadPowerCounters(const std::string& path);

// Adds `run` to the counts in `path`. Waits for the lock at most `lock_wait` (the
// programs must not hold Slurm up); an unreadable file starts the counts afresh,
// which Prometheus reads as a counter reset.
Status AddPowerCall(const std::string& path, const CallOutcome& run,
                    std::chrono::milliseconds lock_wait = std::chrono::milliseconds(2000));

}  // namespace k8sbridge::power
