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

}  // namespace k8sbridge
