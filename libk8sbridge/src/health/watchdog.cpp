#include "k8sbridge/health/watchdog.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace k8sbridge::health {
namespace {

void WriteAll(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Frames: 'P' progress, 'R' result, 'E' error; each "<tag><length>\n<bytes>".
void Frame(int fd, char tag, const std::string& body) {
  WriteAll(fd, fmt::format("{}{}\n", tag, body.size()) + body);
}

}  // namespace

Result<WatchdogResult> RunWithDeadline(const WatchdogWork& work,
                                       std::chrono::milliseconds deadline) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("watchdog: pipe: {}", std::strerror(errno)));
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::IoError(fmt::format("watchdog: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    setpgid(0, 0);  // so the kill reaches anything the work started
    auto progress = [fd = fds[1]](const std::string& line) { Frame(fd, 'P', line); };
    Result<std::string> out = work(progress);
    if (out.ok())
      Frame(fds[1], 'R', *out);
    else
      Frame(fds[1], 'E', out.status().message());
    _exit(0);
  }
  close(fds[1]);
  WatchdogResult result;
  std::string buffer;
  const auto end = std::chrono::steady_clock::now() + deadline;
  bool eof = false;
  while (!eof) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{fds[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc <= 0)
      break;
    char chunk[4096];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    buffer.append(chunk, static_cast<size_t>(n));
    // Consume complete frames.
    for (;;) {
      auto nl = buffer.find('\n');
      if (nl == std::string::npos || nl < 1)
        break;
      size_t len = std::strtoul(buffer.c_str() + 1, nullptr, 10);
      if (buffer.size() < nl + 1 + len)
        break;
      char tag = buffer[0];
      std::string body = buffer.substr(nl + 1, len);
      buffer.erase(0, nl + 1 + len);
      if (tag == 'P')
        result.last_progress = std::move(body);
      else if (tag == 'R') {
        result.finished = true;
        result.output = std::move(body);
      } else if (tag == 'E') {
        result.finished = true;
        result.error = std::move(body);
      }
    }
  }
  close(fds[0]);
  if (!eof || !result.finished) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (eof && !result.finished && result.error.empty())
    result.error = fmt::format("the check's process ended without an answer (status {})", status);
  if (!result.finished && eof)
    result.finished = true;  // crashed: report as an error, not a hang
  return result;
}

}  // namespace k8sbridge::health
