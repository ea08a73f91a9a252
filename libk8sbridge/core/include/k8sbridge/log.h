// Logging sink. Logic in libk8sbridge never writes to stderr or to Slurm's log
// itself: it is handed a Logger. Daemons' plugins pass one that forwards to
// Slurm's logger (with the plugin prefix), programs one that writes to stderr or a
// file, tests a RecordingLogger they can assert on.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace k8sbridge {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
std::string_view LevelName(LogLevel level);
// Now, as every program's log line starts: "2026-12-01T15:04:05Z".
std::string UtcTimestamp();

class Logger {
 public:
  virtual ~Logger() = default;
  virtual void Log(LogLevel level, std::string_view message) = 0;

  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... args) {
    Log(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... args) {
    Log(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void Warning(fmt::format_string<Args...> f, Args&&... args) {
    Log(LogLevel::kWarning, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... args) {
    Log(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
  }
};

// Writes "<time> <prefix>: <level>: <message>" lines to stderr, thread-safe.
class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(std::string prefix, LogLevel min_level = LogLevel::kInfo)
      : prefix_(std::move(prefix)), min_level_(min_level) {}
  void Log(LogLevel level, std::string_view message) override;

 private:
  std::mutex mu_;
  std::string prefix_;
  LogLevel min_level_;
};

// Discards everything.
class NullLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
};

}  // namespace k8sbridge
