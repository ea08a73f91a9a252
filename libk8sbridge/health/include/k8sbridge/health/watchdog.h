// Runs a piece of work that may hang (an NVML call in a wedged driver, a stat on
// a dead NFS server) in a forked child with a deadline. The parent never blocks
// past the deadline: it kills the child and reports the last progress line, so a
// hang is itself a finding that names the call that hung.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "k8sbridge/status.h"

namespace k8sbridge::health {

struct WatchdogResult {
  bool finished = false;      // false: killed at the deadline
  std::string output;         // what the work returned (when finished)
  std::string last_progress;  // the last progress line before the end or the kill
  std::string error;          // the work's own failure message, if it failed
};

// `work` runs in the child: it calls progress() before each step that may hang
// and returns its output, or a failed Status. Returns an error only when the
// child could not be started.
using WatchdogWork =
    std::function<Result<std::string>(const std::function<void(const std::string&)>& progress)>;
Result<WatchdogResult> RunWithDeadline(const WatchdogWork& work,
                                       std::chrono::milliseconds deadline);

}  // namespace k8sbridge::health
