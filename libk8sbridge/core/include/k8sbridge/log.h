// Logging sink. Logic in libk8sbridge never writes to stderr or to Slurm's log
// itself: it is handed a Logger. Daemons' plugins pass one that forwards to
// Slurm's logger (with the plugin prefix), programs one that writes to stderr or a
// file, tests a RecordingLogger they can assert on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "k8sbridge/status.h"

#include <fmt/format.h>

namespace k8sbridge {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
std::string_view LevelName(LogLevel level);
// Now, as every program's log line starts: "2026-12-01T15:04:05Z".
std::string UtcTimestamp();

// The line of a log that says why a program ended: its last error line, else its
// last non-empty line ("" for none); trailing blanks and CRs are left off. A
// failed container's termination message is its log's tail when the program
// wrote none itself (terminationMessagePolicy: FallbackToLogsOnError), and both
// k8sbridge's entrypoints and slurmd end with the error that stopped them. Error
// lines are those at level error or fatal, as these loggers write them
// ("<time> <prefix>: error: ...") and Slurm's daemons do ("slurmd: fatal: ...",
// "[<time>] error: ...", "error: ...").
std::string_view LastErrorLine(std::string_view log);

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

// A short-lived program's log (k8sbridge-power): "<time> <name>[<pid>]: <level>:
// <message>" lines to `out` (stderr) and, once OpenFile succeeded, to a file too.
// Info lines are written in batches, each at most `flush_every` after it was
// logged: a resume of 1,000 nodes logs a line per node, and a write per line (each
// waking whoever reads the pipe, on the same cores) cost a tenth of the call's
// time (docs/power.md, "Scale"). A warning or an error is written at once, with
// every line before it, and so is what is left when the logger is destroyed.
class ProgramLogger final : public Logger {
 public:
  static constexpr std::chrono::milliseconds kFlushEvery{100};
  explicit ProgramLogger(std::string name, std::FILE* out = stderr,
                         std::chrono::milliseconds flush_every = kFlushEvery);
  ~ProgramLogger() override;
  ProgramLogger(const ProgramLogger&) = delete;
  ProgramLogger& operator=(const ProgramLogger&) = delete;

  // Appends to `path` from now on (the lines before it are written out first).
  Status OpenFile(const std::string& path);
  void Log(LogLevel level, std::string_view message) override;
  // Writes every pending line now.
  void Flush();

 private:
  void WriteLocked();
  void FlushEvery(std::stop_token stop);

  std::mutex mu_;
  std::condition_variable_any pending_or_stop_;
  std::string name_;
  std::FILE* out_;
  std::FILE* file_ = nullptr;
  std::chrono::milliseconds flush_every_;
  std::string pending_;
  std::jthread flusher_;  // started by the first line that waits
};

// Discards everything.
class NullLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
};

}  // namespace k8sbridge
