// Pod-level preparation of the shared jail (k8sbridge-jail-prepare): what makes
// a jail usable on one host before slurmd starts there. Run once per pod by the
// worker entrypoint; in Kubernetes each pod has its own mount namespace, so
// these binds are that pod's alone.
//
// It binds into the jail, at the same paths: /dev and /sys (recursive, so GPU
// device nodes and cgroups come along), /etc/hosts and /etc/resolv.conf, the
// munge socket directory, the Slurm installation and its configuration, and the
// GPU driver libraries an administrator lists, plus any --bind. On a jail
// mounted read-only (as workers mount it) the mount points must exist already,
// except a GPU driver file's: its jail directory gets a per-pod writable layer.
//
// Many pods may prepare one jail at once: the mount points they create in the
// shared jail are made under an exclusive lock on <jail>/.k8sbridge-prepare.lock
// (with a deadline, never an endless wait), creation tolerates a concurrent
// creator, and the record of what was mounted is written atomically. A target
// that is already a mount point is left alone, so a second run changes nothing.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/jail/options.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// The program's usage (--help); its first line is repeated after argument errors.
inline constexpr std::string_view kPrepareUsage =
    "usage: k8sbridge-jail-prepare --jail DIR [--slurm-prefix DIR] [--slurm-conf-dir DIR] "
    "[--munge-dir DIR] [--gpu-lib FILE]... [--bind SRC[:DST][:ro]]... [--no-standard] "
    "[--state-file FILE] [--lock-timeout SECONDS] [--undo]\n"
    "       k8sbridge-jail-prepare --help | --version\n"
    "Binds /dev, /sys, the munge socket's directory, Slurm and the GPU libraries into the\n"
    "shared jail, once per pod (docs/jail.md); --undo unmounts what the state file lists.\n";

struct PrepareConfig {
  std::string jail;
  std::string slurm_prefix;                   // empty: not bound
  std::string slurm_conf_dir = "/etc/slurm";  // skipped when missing
  std::string munge_dir = "/run/munge";       // skipped when missing
  std::vector<std::string> gpu_libs;          // files, bound read-only
  std::vector<Bind> binds;                    // --bind
  bool standard = true;                       // /dev, /sys, /etc/hosts, /etc/resolv.conf
  std::string state_file;                     // record of mounts, for --undo
  std::chrono::milliseconds lock_timeout{60000};
};

struct PrepareMount {
  Bind bind;
  bool recursive = false;
  bool optional = false;  // a missing source is skipped, not an error
  // A GPU driver file: where a read-only jail lacks its mount point, its jail
  // directory gets a per-pod writable layer (writable_layer.h) to hold one.
  bool layer_when_read_only = false;
  friend bool operator==(const PrepareMount&, const PrepareMount&) = default;
};

// Parses the program's arguments (argv without argv[0]).
Result<PrepareConfig> ParsePrepareArgs(const std::vector<std::string>& args, bool* undo);

// Pure: the mounts, in order.
std::vector<PrepareMount> BuildPreparePlan(const PrepareConfig& config);

// Default state file for a jail: /run/k8sbridge/jail-prepare/<jail path with / as _>.
std::string DefaultStateFile(const std::string& jail);

// Checks the jail root, takes the lock, makes the mount points and the mounts.
Status PrepareJail(const PrepareConfig& config, Logger& log);

// Unmounts what PrepareJail recorded in the state file, deepest first.
Status UndoPrepare(const PrepareConfig& config, Logger& log);

// The mount points in /proc/self/mountinfo (unescaped).
Result<std::vector<std::string>> MountPoints();

}  // namespace k8sbridge::jail
