// From findings to a Slurm action, owning only what k8sbridge-health did:
// drain with an owned reason; resume only a node it drained itself, and only after
// enough consecutive clean runs; never touch anybody else's drain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k8sbridge/health/findings.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"

namespace k8sbridge::health {

enum class Action {
  kNone,               // healthy and nothing of ours to undo
  kDrain,              // drain (or re-drain with a new reason) with `reason`
  kKeepDrained,        // our drain stays: clean, but not yet enough clean runs
  kResume,             // our drain, enough clean runs
  kLeaveForeignDrain,  // drained by someone else: never touched
};
std::string_view ActionName(Action a);

struct Decision {
  Action action = Action::kNone;
  std::string reason;       // for kDrain
  unsigned clean_runs = 0;  // to remember for the next run
  std::string explanation;  // for the log and the diagnostic report
};

Decision Decide(const slurm::Node& node, const std::vector<Finding>& findings,
                unsigned clean_runs_before, unsigned resume_after_clean_runs);

// Carries the decision out through the Slurm port (kDrain: Drain; kResume: Undrain,
// which clears only the DRAIN flag, so a DOWN set by someone else stays). Returns what
// Slurm said.
Status Apply(const Decision& decision, const std::string& node, slurm::Slurm& slurm);

struct Outcome {
  Decision decision;
  Status status;  // of the fresh read, or what Slurm said to the write
};
// Reads the node afresh, decides on that read and applies the decision. The checks
// take seconds: a drain (or DOWN) somebody set while they ran must be seen, because
// a decision taken on the read before them would clear it or write over its reason.
// If the node cannot be read, nothing is written and the clean-run count stays.
Outcome DecideAndApply(const std::string& node, const std::vector<Finding>& findings,
                       unsigned clean_runs_before, unsigned resume_after_clean_runs,
                       slurm::Slurm& slurm);

// What one run remembers for the next: consecutive clean runs, and the last
// kernel-log record read (so XIDs are reported once, "since the last run").
struct HealthState {
  unsigned clean_runs = 0;
  uint64_t kmsg_sequence = 0;
  bool has_kmsg_sequence = false;
};
Result<HealthState> LoadState(const std::string& path);  // a missing file is a fresh state
Status SaveState(const std::string& path, const HealthState& state);  // atomic (rename)

}  // namespace k8sbridge::health
