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

#include "k8sbridge/container/daemon_system.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::container {

inline constexpr std::string_view kDefaultMungedDir = "/run/k8sbridge-munge";
inline constexpr std::string_view kDefaultMungeSocket = "/run/munge/munge.socket.2";
// munged refuses a shorter key ("Keyfile must be at least 32 bytes", munge's
// src/munged/conf.c, MUNGE_KEY_LEN_MIN_BYTES).
inline constexpr std::uint64_t kMungeKeyMinBytes = 32;

// The container's own munged.
struct MungedSettings {
  std::string key;                                   // K8SBRIDGE_MUNGED_KEY: the Secret's key
  std::string munged = "/usr/sbin/munged";           // K8SBRIDGE_MUNGED
  std::string dir = std::string(kDefaultMungedDir);  // K8SBRIDGE_MUNGED_DIR
  std::string socket;                                // K8SBRIDGE_MUNGE_SOCKET; "" = the default
  std::string user;                                  // K8SBRIDGE_MUNGED_USER; "" = root
};

std::string MungeSocketOf(const MungedSettings& settings);

using Getenv = std::function<const char*(const char*)>;
// The variable's value, or `fallback` when it is unset or empty.
std::string EnvOr(const Getenv& getenv, std::string_view name, std::string fallback = "");
// Ok for "" and absolute paths; otherwise names the variable and what it must give.
Status NeedAbsolutePath(std::string_view variable, const std::string& value, std::string_view what);
// K8SBRIDGE_MUNGED_KEY (`default_key` when unset), K8SBRIDGE_MUNGED,
// K8SBRIDGE_MUNGED_DIR, K8SBRIDGE_MUNGE_SOCKET and K8SBRIDGE_MUNGED_USER.
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

// Checks the key, copies it private and starts munged (as `user`, through setpriv,
// when one is set: the key's copy and both directories are then that user's);
// returns munged's pid file.
Result<std::string> StartPrivateMunged(const MungedSettings& settings, DaemonSystem& system,
                                       Logger& log);

// "24.11.5" from what `slurmd -V` prints ("slurm 24.11.5", Debian: "slurm-wlm
// 24.11.5"); "" when the output names no version.
std::string SlurmVersionIn(std::string_view version_output);

// Runs `<binary> -V` and refuses a Slurm other than `built_for`, in one line that
// names both versions and the fix; `variable` is the one that sets `binary`.
Status CheckSlurmVersion(const std::string& binary, std::string_view variable,
                         std::string_view built_for, DaemonSystem& system, Logger& log);

}  // namespace k8sbridge::container
