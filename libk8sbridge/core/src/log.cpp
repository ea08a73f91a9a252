#include "k8sbridge/log.h"

#include <cstdio>
#include <ctime>

namespace k8sbridge {

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

std::string UtcTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return stamp;
}

void StderrLogger::Log(LogLevel level, std::string_view message) {
  if (level < min_level_)
    return;
  const std::string stamp = UtcTimestamp();
  std::lock_guard lock(mu_);
  std::fprintf(stderr, "%s %s: %.*s: %.*s\n", stamp.c_str(), prefix_.c_str(),
               static_cast<int>(LevelName(level).size()), LevelName(level).data(),
               static_cast<int>(message.size()), message.data());
}

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
