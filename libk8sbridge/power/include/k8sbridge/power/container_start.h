// What every k8sbridge container entrypoint (k8sbridge-worker, k8sbridge-entrypoint)
// does before its Slurm daemon: check the munge key the Secret mounted, start a
// munged of the container's own with a private copy of it, check that the image's
// Slurm is the one k8sbridge was built for, then run the daemon: exec'd, or
// supervised when the entrypoint is the container's PID 1 (k8sbridge/supervise.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

inline constexpr std::string_view kDefaultMungedDir = "/run/k8sbridge-munge";
inline constexpr std::string_view kDefaultMungeSocket = "/run/munge/munge.socket.2";
// munged refuses a shorter key ("Keyfile must be at least 32 bytes", munge's
// src/munged/conf.c, MUNGE_KEY_LEN_MIN_BYTES).
inline constexpr std::uint64_t kMungeKeyMinBytes = 32;

// What stat (following symlinks, as a ConfigMap's ..data links need) says of a path.
struct FileFacts {
  bool exists = false;
  bool is_directory = false;
  bool readable = false;  // by us (open for reading works)
  std::uint64_t size = 0;
  std::string error;  // why it does not exist or cannot be read
};

// The outside world of an entrypoint.
class DaemonSystem {
 public:
  virtual ~DaemonSystem() = default;
  virtual Clock& clock() = 0;
  // Runs a program to completion; a non-zero exit is an error naming it.
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

// The container's own munged.
struct MungedSettings {
  std::string key;                                   // K8SBRIDGE_MUNGED_KEY: the Secret's key
  std::string munged = "/usr/sbin/munged";           // K8SBRIDGE_MUNGED
  std::string dir = std::string(kDefaultMungedDir);  // K8SBRIDGE_MUNGED_DIR
  std::string socket;                                // K8SBRIDGE_MUNGE_SOCKET; "" = the default
};

std::string MungeSocketOf(const MungedSettings& settings);

using Getenv = std::function<const char*(const char*)>;
// The variable's value, or `fallback` when it is unset or empty.
std::string EnvOr(const Getenv& getenv, std::string_view name, std::string fallback = "");
// Ok for "" and absolute paths; otherwise names the variable and what it must give.
Status NeedAbsolutePath(std::string_view variable, const std::string& value, std::string_view what);
// K8SBRIDGE_MUNGED_KEY (`default_key` when unset), K8SBRIDGE_MUNGED,
// K8SBRIDGE_MUNGED_DIR and K8SBRIDGE_MUNGE_SOCKET.
Result<MungedSettings> MungedSettingsFromEnv(const Getenv& getenv, std::string default_key);
// K8SBRIDGE_INIT: "1" supervises the daemon even when not PID 1 (tests), "0" or
// unset leaves it to whether the entrypoint is PID 1.
Result<bool> InitForcedFromEnv(const Getenv& getenv);

// munged's private directory must neither hold nor sit inside the socket's
// directory (which k8sbridge-jail-prepare binds into every job's jail).
Status CheckMungedDirApart(const MungedSettings& settings);

// The key exists, is a readable file and is long enough for munged; the error
// names the path, its variable and the fix.
Status CheckMungeKeyFile(const std::string& path, DaemonSystem& system);

// Checks the key, copies it private and starts munged; returns munged's pid file.
Result<std::string> StartPrivateMunged(const MungedSettings& settings, DaemonSystem& system,
                                       Logger& log);

// "24.11.5" from what `slurmd -V` prints ("slurm 24.11.5", Debian: "slurm-wlm
// 24.11.5"); "" when the output names no version.
std::string SlurmVersionIn(std::string_view version_output);

// Runs `<binary> -V` and refuses a Slurm other than `built_for`, in one line that
// names both versions and the fix; `variable` is the one that sets `binary`.
Status CheckSlurmVersion(const std::string& binary, std::string_view variable,
                         std::string_view built_for, DaemonSystem& system, Logger& log);

// The real system calls behind DaemonSystem, for the programs' RealDaemonSystemOf.
namespace real {
Status Run(const std::vector<std::string>& argv);
Result<std::string> Output(const std::vector<std::string>& argv);
FileFacts Inspect(const std::string& path);
Status CopyPrivateFile(const std::string& from, const std::string& to);
Status MakeDirectory(const std::string& path, unsigned mode);
Status WriteFile(const std::string& path, const std::string& content, unsigned mode);
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
  void StopDaemon(const std::string& pid_file) override { real::StopDaemon(pid_file, log_); }
  Status Exec(const std::vector<std::string>& argv) override { return real::Exec(argv); }
  Result<int> Supervise(const std::vector<std::string>& argv,
                        const std::string& munged_pid_file) override {
    return real::Supervise(argv, munged_pid_file, log_);
  }

 private:
  Logger& log_;
};

}  // namespace k8sbridge::power
