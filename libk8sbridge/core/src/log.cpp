#include "k8sbridge/log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "k8sbridge/text.h"

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

namespace {

// Whether `line`'s level is error or fatal: the level comes first, or after the
// first ": " (a program's prefix), or after the first "] " of a line that starts
// with a bracketed time, so a message that merely quotes "error: " is not one.
bool IsErrorLine(std::string_view line) {
  auto level_at = [&](size_t at) {
    const std::string_view rest = line.substr(std::min(at, line.size()));
    return rest.starts_with("error:") || rest.starts_with("fatal:");
  };
  if (level_at(0))
    return true;
  if (size_t colon = line.find(": "); colon != std::string_view::npos && level_at(colon + 2))
    return true;
  const size_t bracket = line.find("] ");
  return line.starts_with('[') && bracket != std::string_view::npos && level_at(bracket + 2);
}

}  // namespace

std::string_view LastErrorLine(std::string_view log) {
  std::string_view last_line;
  std::string_view last_error;
  for (std::string_view line : text::Split(log, '\n')) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.empty())
      continue;
    last_line = line;
    if (IsErrorLine(line))
      last_error = line;
  }
  return last_error.empty() ? last_line : last_error;
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

ProgramLogger::ProgramLogger(std::string name, std::FILE* out,
                             std::chrono::milliseconds flush_every)
    : name_(std::move(name)), out_(out), flush_every_(flush_every) {}

ProgramLogger::~ProgramLogger() {
  if (flusher_.joinable()) {
    flusher_.request_stop();
    flusher_.join();
  }
  Flush();
  if (file_)
    std::fclose(file_);
}

Status ProgramLogger::OpenFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "ae");
  if (!f) {
    return Status::IoError(
        fmt::format("LogFile={}: cannot open for appending: {}", path, std::strerror(errno)));
  }
  std::lock_guard lock(mu_);
  WriteLocked();
  if (file_)
    std::fclose(file_);
  file_ = f;
  return Status::Ok();
}

void ProgramLogger::Log(LogLevel level, std::string_view message) {
  if (level == LogLevel::kDebug)
    return;
  std::string line = fmt::format("{} {}[{}]: {}: {}\n", UtcTimestamp(), name_, getpid(),
                                 LevelName(level), message);
  std::lock_guard lock(mu_);
  const bool first_pending = pending_.empty();
  pending_ += line;
  if (level >= LogLevel::kWarning || flush_every_.count() <= 0) {
    WriteLocked();
    return;
  }
  if (!flusher_.joinable())
    flusher_ = std::jthread([this](std::stop_token stop) { FlushEvery(stop); });
  else if (first_pending)
    pending_or_stop_.notify_one();
}

void ProgramLogger::Flush() {
  std::lock_guard lock(mu_);
  WriteLocked();
}

void ProgramLogger::WriteLocked() {
  if (pending_.empty())
    return;
  std::fwrite(pending_.data(), 1, pending_.size(), out_);
  std::fflush(out_);
  if (file_) {
    std::fwrite(pending_.data(), 1, pending_.size(), file_);
    std::fflush(file_);
  }
  pending_.clear();
}

// The flusher thread: once a line waits, lets more join it for flush_every_, then
// writes them all.
void ProgramLogger::FlushEvery(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (pending_or_stop_.wait(lock, stop, [&] { return !pending_.empty(); })) {
    pending_or_stop_.wait_for(lock, stop, flush_every_, [] { return false; });
    WriteLocked();
  }
}

}  // namespace k8sbridge
