#include "recording_logger.h"

namespace k8sbridge {

void RecordingLogger::Log(LogLevel level, std::string_view message) {
  std::lock_guard lock(mu_);
  lines_.push_back({level, std::string(message)});
}

std::vector<RecordingLogger::Line> RecordingLogger::lines() const {
  std::lock_guard lock(mu_);
  return lines_;
}

bool RecordingLogger::Contains(std::string_view needle, LogLevel level) const {
  std::lock_guard lock(mu_);
  for (const Line& line : lines_) {
    if (line.level >= level && line.message.find(needle) != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace k8sbridge
