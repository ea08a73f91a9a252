#include "k8sbridge/power/counters.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "k8sbridge/file.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {
namespace {

constexpr std::string_view kVersionLine = "# k8sbridge-power counters 1";

// The whole-number fields of a line, in the order they are written.
struct Field {
  std::string_view name;
  uint64_t CallTotals::*member;
};
constexpr Field kFields[] = {
    {"calls_ok", &CallTotals::calls_ok},         {"calls_failed", &CallTotals::calls_failed},
    {"calls_error", &CallTotals::calls_error},   {"nodes_ok", &CallTotals::nodes_ok},
    {"nodes_failed", &CallTotals::nodes_failed},
};
constexpr std::string_view kSeconds = "seconds";

Status SetField(CallTotals& totals, std::string_view name, std::string_view value) {
  if (name == kSeconds) {
    auto seconds = text::ParseDouble(value, 0);
    if (!seconds.ok())
      return seconds.status();
    totals.seconds = *seconds;
    return Status::Ok();
  }
  for (const Field& f : kFields) {
    if (f.name != name)
      continue;
    auto n = text::ParseInt<uint64_t>(value);
    if (!n.ok())
      return n.status();
    totals.*f.member = *n;
    return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format("unknown field '{}'", name));
}

Result<std::pair<std::string, CallTotals>> ParseLine(std::string_view line) {
  std::vector<std::string_view> words = text::Split(line, ' ');
  std::pair<std::string, CallTotals> out{std::string(words.front()), {}};
  for (size_t i = 1; i < words.size(); ++i) {
    size_t eq = words[i].find('=');
    if (eq == std::string_view::npos)
      return Status::InvalidArgument(fmt::format("'{}' is not name=value", words[i]));
    if (Status s = SetField(out.second, words[i].substr(0, eq), words[i].substr(eq + 1)); !s.ok())
      return s;
  }
  return out;
}

// An flock on "<path>.lock", tried until `wait` has passed.
class FileLock {
 public:
  static Result<FileLock> Take(const std::string& path, std::chrono::milliseconds wait) {
    FileLock lock(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.fd_ < 0)
      return Status::IoError(fmt::format("{}: {}", path, std::strerror(errno)));
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline)
        return Status::Timeout(fmt::format("{}: not locked within {} ms: {}", path, wait.count(),
                                           std::strerror(errno)));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return lock;
  }
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() {
    if (fd_ >= 0)
      close(fd_);  // drops the lock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace

std::string FormatPowerCounters(const PowerCounters& counters) {
  std::string out(kVersionLine);
  out += '\n';
  for (const auto& [subcommand, totals] : counters) {
    out += subcommand;
    for (const Field& f : kFields)
      out += fmt::format(" {}={}", f.name, totals.*f.member);
    out += fmt::format(" {}={}\n", kSeconds, totals.seconds);
  }
  return out;
}

Result<PowerCounters> ParsePowerCounters(std::string_view text) {
  std::vector<std::string_view> lines = text::Split(text, '\n');
  if (lines.front() != kVersionLine)
    return Status::InvalidArgument(fmt::format("line 1: expected '{}'", kVersionLine));
  PowerCounters counters;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty())
      continue;
    auto parsed = ParseLine(lines[i]);
    if (!parsed.ok())
      return Status::InvalidArgument(fmt::format("line {}: {}", i + 1, parsed.status().message()));
    counters[parsed->first] = parsed->second;
  }
  return counters;
}

Result<PowerCounters> ReadPowerCounters(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return PowerCounters{};
    return Status::IoError(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  const int read_errno = errno;
  close(fd);
  if (n < 0)
    return Status::IoError(fmt::format("{}: {}", path, std::strerror(read_errno)));
  auto counters = ParsePowerCounters(text);
  if (!counters.ok())
    return Status::InvalidArgument(fmt::format("{}: {}", path, counters.status().message()));
  return counters;
}

Status AddPowerCall(const std::string& path, const CallOutcome& run,
                    std::chrono::milliseconds lock_wait) {
  auto lock = FileLock::Take(path + ".lock", lock_wait);
  if (!lock.ok())
    return lock.status();
  auto read = ReadPowerCounters(path);
  PowerCounters counters = read.ok() ? std::move(*read) : PowerCounters{};
  CallTotals& totals = counters[run.subcommand];
  if (run.gave_up)
    ++totals.calls_error;
  else if (run.nodes_failed > 0)
    ++totals.calls_failed;
  else
    ++totals.calls_ok;
  totals.nodes_ok += run.nodes_ok;
  totals.nodes_failed += run.nodes_failed;
  totals.seconds += run.took.count();
  Status written = WriteFileAtomic(path, FormatPowerCounters(counters), 0644);
  if (!written.ok() || read.ok())
    return written;
  return Status::InvalidArgument(
      fmt::format("{}; the counts start afresh", read.status().message()));
}

}  // namespace k8sbridge::power
