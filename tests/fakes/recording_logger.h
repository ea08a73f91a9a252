// A Logger (k8sbridge/log.h) that keeps every line, for unit tests only.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/log.h"

namespace k8sbridge {

// Keeps every line, for tests to assert on.
class RecordingLogger final : public Logger {
 public:
  struct Line {
    LogLevel level;
    std::string message;
  };
  void Log(LogLevel level, std::string_view message) override;
  std::vector<Line> lines() const;
  // True if any line at `level` or above contains `needle`.
  bool Contains(std::string_view needle, LogLevel level = LogLevel::kDebug) const;

 private:
  mutable std::mutex mu_;
  std::vector<Line> lines_;
};

}  // namespace k8sbridge
