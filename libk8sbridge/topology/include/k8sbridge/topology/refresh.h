// Writing a new topology file safely and telling Slurm about it only when the
// hierarchy changed. Slurm 24.11 re-reads topology.conf only on `scontrol
// reconfigure` (which re-execs slurmctld), so every needless reconfigure costs a
// controller restart: the decision compares what Slurm last applied with what was
// just rendered, and the rendering is deterministic (no timestamps), with hosts
// that are merely down kept in place (BuildOptions::remembered).
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::topology {

// Tells Slurm to re-read its configuration.
class Reconfigurer {
 public:
  virtual ~Reconfigurer() = default;
  virtual Status Reconfigure() = 0;
};

// Runs `<scontrol> reconfigure` and waits for it.
class ScontrolReconfigurer final : public Reconfigurer {
 public:
  explicit ScontrolReconfigurer(std::string scontrol = "scontrol")
      : scontrol_(std::move(scontrol)) {}
  Status Reconfigure() override;

 private:
  std::string scontrol_;
};

// Reads a whole file; kNotFound if it does not exist.
Result<std::string> ReadFile(const std::string& path);

struct RefreshOptions {
  std::string output_path;   // topology.conf / topology.yaml
  std::string applied_path;  // what Slurm last applied; default <output_path>.applied
  // false: Slurm is not running yet (called before slurmctld starts) and will read
  // the file itself; what is written counts as applied.
  bool reconfigure = true;
};

struct RefreshOutcome {
  bool wrote = false;
  bool reconfigured = false;
};

// Writes `rendered` if it differs from the file, and reconfigures Slurm if it
// differs from what Slurm last applied. A failed reconfigure is returned as an error
// and retried by the next refresh.
Result<RefreshOutcome> Refresh(std::string_view rendered, const RefreshOptions& options,
                               Reconfigurer& reconfigurer, Logger& logger);

// The refresh of a long-running k8sbridge-topology (--interval, the controller
// pod's sidecar): every round hands the new rendering, or why there is none, to
// Refresh. A round that fails keeps the file and what Slurm applied as they were;
// its error is logged when it first appears or changes, and its end once, so a
// refresh every few seconds neither rewrites an unchanged file nor floods the log.
class PeriodicRefresh {
 public:
  PeriodicRefresh(RefreshOptions options, Reconfigurer& reconfigurer, Logger& logger)
      : options_(std::move(options)), reconfigurer_(reconfigurer), logger_(logger) {}
  Result<RefreshOutcome> Round(const Result<std::string>& rendered);

 private:
  RefreshOptions options_;
  Reconfigurer& reconfigurer_;
  Logger& logger_;
  std::string last_error_;  // "" while the last round succeeded
};

}  // namespace k8sbridge::topology
