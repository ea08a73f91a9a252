// From findings to a Slurm action, owning only what k8sbridge-health did:
// drain with an owned reason; resume only a node it drained itself, and only after
// enough consecutive clean runs; never touch anybody else's drain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k8sbridge/health/findings.h"
#include "k8sbridge/status.h"

namespace k8sbridge::health {

struct SlurmNode {
  std::string name;
  bool drain = false;  // DRAIN flag set (draining or drained)
  std::string reason;
  std::string gres;   // "gpu:8", for the expected GPU count
  bool down = false;  // base state DOWN (or the FAIL flag): out of service too
};

// Slurm as the health program sees it; the real one uses libslurm
// (programs/health), tests use RecordingSlurmNodes.
class SlurmNodes {
 public:
  virtual ~SlurmNodes() = default;
  virtual Result<SlurmNode> Get(const std::string& name) = 0;
  virtual Status Drain(const std::string& name, const std::string& reason) = 0;
  virtual Status Resume(const std::string& name) = 0;
};

class RecordingSlurmNodes final : public SlurmNodes {
 public:
  explicit RecordingSlurmNodes(SlurmNode node) : node_(std::move(node)) {}
  Result<SlurmNode> Get(const std::string& name) override;
  Status Drain(const std::string& name, const std::string& reason) override;
  Status Resume(const std::string& name) override;
  const SlurmNode& node() const { return node_; }
  // What slurmctld now has for the node, as if someone else had changed it.
  void Set(SlurmNode node) { node_ = std::move(node); }
  const std::vector<std::string>& calls() const {
    return calls_;
  }  // "drain w-0: <reason>", "resume w-0"

 private:
  SlurmNode node_;
  std::vector<std::string> calls_;
};

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

Decision Decide(const SlurmNode& node, const std::vector<Finding>& findings,
                unsigned clean_runs_before, unsigned resume_after_clean_runs);

// Carries the decision out. Returns what Slurm said.
Status Apply(const Decision& decision, const std::string& node, SlurmNodes& slurm);

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
                       SlurmNodes& slurm);

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
