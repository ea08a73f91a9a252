// The outside world of a container entrypoint (k8sbridge-worker,
// k8sbridge-entrypoint): programs, files, munged, and the daemon it execs or
// supervises. The entrypoints' logic talks to it only, so tests run it on a fake
// (tests/fakes/fake_daemon_system.h); daemon_system.cpp holds the real calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::container {

// What stat (following symlinks, as a ConfigMap's ..data links need) says of a path.
struct FileFacts {
  bool exists = false;
  bool is_directory = false;
  bool readable = false;  // by us (open for reading works)
  std::uint64_t size = 0;
  std::string error;  // why it does not exist or cannot be read
};

// A user's ids, as the image's passwd names them.
struct UserIds {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;  // the user's primary group
};

// The outside world of an entrypoint.
class DaemonSystem {
 public:
  virtual ~DaemonSystem() = default;
  virtual Clock& clock() = 0;
  // Runs a program to completion; a non-zero exit is an error naming it and quoting
  // the last line the program wrote on stderr (which also goes to our stderr).
  virtual Status Run(const std::vector<std::string>& argv) = 0;
  // Runs a program to completion and returns what it wrote on stdout.
  virtual Result<std::string> Output(const std::vector<std::string>& argv) = 0;
  virtual FileFacts Inspect(const std::string& path) = 0;
  // Copies `from` to `to`, mode 0400 and owned by the caller (munged insists on
  // owning its key, whatever mode the Secret volume gave it).
  virtual Status CopyPrivateFile(const std::string& from, const std::string& to) = 0;
  // Creates `path` (and its parents) if needed and sets it to `mode`, owned by the
  // caller (an emptyDir is 0777; munged refuses directories others may write to).
  virtual Status MakeDirectory(const std::string& path, unsigned mode) = 0;
  // Replaces `path` atomically with `content`, at `mode` (readers never see half).
  virtual Status WriteFile(const std::string& path, const std::string& content, unsigned mode) = 0;
  // The ids of user `name` in the image's passwd.
  virtual Result<UserIds> LookUpUser(const std::string& name) = 0;
  // Gives `path` (not following a final symlink) to `owner`: its uid and group.
  virtual Status GiveTo(const std::string& path, const UserIds& owner) = 0;
  // Stops the daemon whose pid is in `pid_file` and waits (bounded) until it is
  // gone (the container's munged, when the entrypoint fails after starting it).
  virtual void StopDaemon(const std::string& pid_file) = 0;
  // Replaces the process; returns only on failure (fakes record and return Ok).
  virtual Status Exec(const std::vector<std::string>& argv) = 0;
  // Runs argv as PID 1 does (k8sbridge/supervise.h) and returns its exit code; the
  // daemon whose pid is in `munged_pid_file` ("" = none) is stopped after it.
  virtual Result<int> Supervise(const std::vector<std::string>& argv,
                                const std::string& munged_pid_file) = 0;
};

// The real system calls behind DaemonSystem, for the programs' RealDaemonSystemOf.
namespace real {
Status Run(const std::vector<std::string>& argv);
Result<std::string> Output(const std::vector<std::string>& argv);
FileFacts Inspect(const std::string& path);
Status CopyPrivateFile(const std::string& from, const std::string& to);
Status MakeDirectory(const std::string& path, unsigned mode);
Status WriteFile(const std::string& path, const std::string& content, unsigned mode);
Result<UserIds> LookUpUser(const std::string& name);
Status GiveTo(const std::string& path, const UserIds& owner);
void StopDaemon(const std::string& pid_file, Logger& log);
Status Exec(const std::vector<std::string>& argv);
Result<int> Supervise(const std::vector<std::string>& argv, const std::string& munged_pid_file,
                      Logger& log);
}  // namespace real

// DaemonSystem (or an interface derived from it) over the real system calls.
template <typename Interface>
class RealDaemonSystemOf : public Interface {
 public:
  explicit RealDaemonSystemOf(Logger& log) : log_(log) {}
  Clock& clock() override { return RealClock::Instance(); }
  Status Run(const std::vector<std::string>& argv) override { return real::Run(argv); }
  Result<std::string> Output(const std::vector<std::string>& argv) override {
    return real::Output(argv);
  }
  FileFacts Inspect(const std::string& path) override { return real::Inspect(path); }
  Status CopyPrivateFile(const std::string& from, const std::string& to) override {
    return real::CopyPrivateFile(from, to);
  }
  Status MakeDirectory(const std::string& path, unsigned mode) override {
    return real::MakeDirectory(path, mode);
  }
  Status WriteFile(const std::string& path, const std::string& content, unsigned mode) override {
    return real::WriteFile(path, content, mode);
  }
  Result<UserIds> LookUpUser(const std::string& name) override { return real::LookUpUser(name); }
  Status GiveTo(const std::string& path, const UserIds& owner) override {
    return real::GiveTo(path, owner);
  }
  void StopDaemon(const std::string& pid_file) override { real::StopDaemon(pid_file, log_); }
  Status Exec(const std::vector<std::string>& argv) override { return real::Exec(argv); }
  Result<int> Supervise(const std::vector<std::string>& argv,
                        const std::string& munged_pid_file) override {
    return real::Supervise(argv, munged_pid_file, log_);
  }

 private:
  Logger& log_;
};

}  // namespace k8sbridge::container
