#include "k8sbridge/topology/refresh.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/file.h"

extern char** environ;

namespace k8sbridge::topology {

Status ScontrolReconfigurer::Reconfigure() {
  std::string arg0 = scontrol_;
  std::string arg1 = "reconfigure";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  // scontrol starts with no signal blocked, whatever the caller blocks (a refresh
  // loop blocks SIGTERM and SIGINT to wait for them).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  int rc = posix_spawnp(&pid, scontrol_.c_str(), nullptr, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status::IoError(
        fmt::format("cannot run \"{} reconfigure\": {}; is scontrol on PATH "
                    "(or set --scontrol)?",
                    scontrol_, std::strerror(rc)));
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) {
      return Status::IoError(fmt::format("waiting for scontrol: {}", std::strerror(errno)));
    }
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Unavailable(
        fmt::format("\"{} reconfigure\" failed (status {}); the new topology is written and the "
                    "next refresh tries again",
                    scontrol_, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
  }
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return Status::NotFound(fmt::format("{} does not exist", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IoError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

Result<RefreshOutcome> Refresh(std::string_view rendered, const RefreshOptions& options,
                               Reconfigurer& reconfigurer, Logger& logger) {
  RefreshOutcome outcome;
  std::string applied_path =
      options.applied_path.empty() ? options.output_path + ".applied" : options.applied_path;
  Result<std::string> current = ReadFile(options.output_path);
  if (!current.ok() && current.status().code() != Status::Code::kNotFound) {
    return current.status();
  }
  if (!current.ok() || *current != rendered) {
    if (Status s = WriteFileAtomic(options.output_path, rendered, 0644); !s.ok()) {
      return s;
    }
    outcome.wrote = true;
    logger.Info("wrote new topology to {}", options.output_path);
  }
  Result<std::string> applied = ReadFile(applied_path);
  if (!applied.ok() && applied.status().code() != Status::Code::kNotFound) {
    return applied.status();
  }
  if (applied.ok() && *applied == rendered) {
    return outcome;
  }
  if (options.reconfigure) {
    logger.Info("switch hierarchy changed: running scontrol reconfigure");
    if (Status s = reconfigurer.Reconfigure(); !s.ok()) {
      return s;
    }
    outcome.reconfigured = true;
  }
  if (Status s = WriteFileAtomic(applied_path, rendered, 0644); !s.ok()) {
    return s;
  }
  return outcome;
}

Result<RefreshOutcome> PeriodicRefresh::Round(const Result<std::string>& rendered) {
  Result<RefreshOutcome> outcome =
      rendered.ok() ? Refresh(*rendered, options_, reconfigurer_, logger_) : rendered.status();
  if (outcome.ok()) {
    if (!last_error_.empty()) {
      logger_.Info("refresh works again; {} is current", options_.output_path);
    }
    last_error_.clear();
    return outcome;
  }
  const std::string& message = outcome.status().message();
  if (message != last_error_) {
    logger_.Error("{} (tried again every round)", message);
  } else {
    logger_.Debug("still failing: {}", message);
  }
  last_error_ = message;
  return outcome;
}

}  // namespace k8sbridge::topology
