#include "k8sbridge/container/container_start.h"

#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/contract.h"

namespace k8sbridge::container {
namespace {

std::string Dir(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

// True when `inner` is `outer` or below it (both absolute, no trailing '/').
bool Within(std::string_view inner, std::string_view outer) {
  if (outer == "/")
    return true;
  return inner == outer || (inner.starts_with(outer) && inner[outer.size()] == '/');
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

// With a user set: the key's copy and munged's two directories become that user's
// (munged checks it owns them), and munged starts through setpriv as that user,
// its primary group and no other; returns what goes before munged's argv.
Result<std::vector<std::string>> DropMungedRoot(const MungedSettings& s,
                                                const std::vector<std::string>& owned,
                                                DaemonSystem& system) {
  if (s.user.empty())
    return std::vector<std::string>{};
  auto ids = system.LookUpUser(s.user);
  if (!ids.ok()) {
    return Status::NotFound(fmt::format(
        "{}={}: {}: name a user of the image (Debian's munge package makes munge), or unset it "
        "to run munged as root",
        contract::kEnvMungedUser, s.user, ids.status().message()));
  }
  for (const std::string& path : owned) {
    if (Status st = system.GiveTo(path, *ids); !st.ok())
      return st.WithContext(fmt::format("{}={}", contract::kEnvMungedUser, s.user));
  }
  return std::vector<std::string>{"setpriv", fmt::format("--reuid={}", ids->uid),
                                  fmt::format("--regid={}", ids->gid), "--clear-groups", "--"};
}

}  // namespace

std::string EnvOr(const Getenv& getenv, std::string_view name, std::string fallback) {
  const char* v = getenv(std::string(name).c_str());
  return v && *v ? std::string(v) : fallback;
}

Status NeedAbsolutePath(std::string_view variable, const std::string& value,
                        std::string_view what) {
  if (!value.empty() && value.front() != '/') {
    return Status::InvalidArgument(
        fmt::format("{}='{}' is not an absolute path: give the path of {}", variable, value, what));
  }
  return Status::Ok();
}

Result<MungedSettings> MungedSettingsFromEnv(const Getenv& getenv, std::string default_key) {
  MungedSettings s;
  s.key = EnvOr(getenv, contract::kEnvMungedKey, std::move(default_key));
  s.munged = EnvOr(getenv, contract::kEnvMunged, s.munged);
  s.dir = WithoutTrailingSlashes(EnvOr(getenv, contract::kEnvMungedDir, s.dir));
  s.socket = EnvOr(getenv, contract::kEnvMungeSocket);
  s.user = EnvOr(getenv, contract::kEnvMungedUser);
  for (const auto& [variable, value, what] :
       {std::tuple{contract::kEnvMungeSocket, s.socket, "munged's socket"},
        std::tuple{contract::kEnvMungedKey, s.key, "the munge key file"},
        std::tuple{contract::kEnvMunged, s.munged, "munged"},
        std::tuple{contract::kEnvMungedDir, s.dir, "munged's private directory"}}) {
    if (Status st = NeedAbsolutePath(variable, value, what); !st.ok())
      return st;
  }
  if (!s.key.empty()) {
    if (Status st = CheckMungedDirApart(s); !st.ok())
      return st;
  }
  return s;
}

Result<bool> InitForcedFromEnv(const Getenv& getenv) {
  const std::string v = EnvOr(getenv, contract::kEnvInit);
  if (v.empty() || v == "0")
    return false;
  if (v == "1")
    return true;
  return Status::InvalidArgument(fmt::format(
      "{}='{}': give 1 to run the daemon as a supervised child even when not PID 1, or 0 (the "
      "default: only as PID 1)",
      contract::kEnvInit, v));
}

std::string MungeSocketOf(const MungedSettings& s) {
  return s.socket.empty() ? std::string(kDefaultMungeSocket) : s.socket;
}

Status CheckMungedDirApart(const MungedSettings& s) {
  const std::string socket_dir = Dir(MungeSocketOf(s));
  if (!Within(s.dir, socket_dir) && !Within(socket_dir, s.dir))
    return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{}={} and the munge socket's directory {} ({}) must not contain one another: the "
      "socket's directory is bound into every job's jail, and the key must stay out of it; "
      "use a directory of its own such as {}",
      contract::kEnvMungedDir, s.dir, socket_dir, contract::kEnvMungeSocket, kDefaultMungedDir));
}

Status CheckMungeKeyFile(const std::string& path, DaemonSystem& system) {
  const FileFacts f = system.Inspect(path);
  const auto fix =
      fmt::format("mount the Secret with the cluster's munge.key there, or set {} to where it is",
                  contract::kEnvMungedKey);
  if (!f.exists)
    return Status::NotFound(fmt::format("munge key {} is missing ({}): {}", path, f.error, fix));
  if (f.is_directory) {
    return Status::InvalidArgument(fmt::format(
        "munge key {} is a directory, not the key: {} names the key file itself (the Secret "
        "volume's munge.key item)",
        path, contract::kEnvMungedKey));
  }
  if (!f.readable) {
    return Status::PermissionDenied(fmt::format(
        "munge key {} cannot be read ({}): give the Secret volume a mode this container's user "
        "can read (defaultMode 0400 with the user root)",
        path, f.error));
  }
  if (f.size < kMungeKeyMinBytes) {
    return Status::InvalidArgument(fmt::format(
        "munge key {} is {} bytes, munged needs at least {}: make the Secret from a key that "
        "`mungekey --create` wrote (the controller's /etc/munge/munge.key)",
        path, f.size, kMungeKeyMinBytes));
  }
  return Status::Ok();
}

Result<std::string> StartPrivateMunged(const MungedSettings& s, DaemonSystem& system, Logger& log) {
  if (Status st = CheckMungeKeyFile(s.key, system); !st.ok())
    return st;
  // Two directories of the container's own (emptyDirs), never the image's
  // /run/munge, /var/lib/munge or /var/log/munge: the socket's, which
  // k8sbridge-jail-prepare binds into every job's jail, holds only the socket
  // (0755 so jobs reach it); the key, the seed, the pid and the log stay in one
  // of munged's user alone (root unless K8SBRIDGE_MUNGED_USER) outside it. Owners
  // and modes then satisfy munged's own checks: no --force.
  const std::string socket = MungeSocketOf(s);
  const std::string socket_dir = Dir(socket);
  if (Status st = system.MakeDirectory(socket_dir, 0755); !st.ok())
    return st.WithContext(fmt::format("preparing the munge socket directory {}", socket_dir));
  if (Status st = system.MakeDirectory(s.dir, 0700); !st.ok())
    return st.WithContext(fmt::format("preparing munged's private directory {} ({})", s.dir,
                                      contract::kEnvMungedDir));
  const std::string key = s.dir + "/munge.key";
  const std::string pid_file = s.dir + "/munged.pid";
  if (Status st = system.CopyPrivateFile(s.key, key); !st.ok()) {
    return st.WithContext(fmt::format(
        "{}={}: copying the munge key (mount the Secret with the cluster's munge.key there)",
        contract::kEnvMungedKey, s.key));
  }
  auto argv = DropMungedRoot(s, {socket_dir, s.dir, key}, system);
  if (!argv.ok())
    return argv.status();
  argv->insert(argv->end(),
               {s.munged, "--key-file=" + key, "--socket=" + socket, "--pid-file=" + pid_file,
                "--seed-file=" + s.dir + "/munged.seed", "--log-file=" + s.dir + "/munged.log"});
  log.Info("starting the container's munged: socket {}, key {}, as {}", socket, key,
           s.user.empty() ? "root" : s.user);
  if (Status st = system.Run(*argv); !st.ok())
    return st.WithContext(fmt::format("starting munged (its log: {}/munged.log)", s.dir));
  return pid_file;
}

std::string SlurmVersionIn(std::string_view output) {
  // The first line's last word: "slurm 24.11.5", "slurm-wlm 24.11.5".
  const std::string_view line = output.substr(0, output.find('\n'));
  const auto end = line.find_last_not_of(" \t\r");
  if (end == std::string_view::npos)
    return "";
  const auto start = line.find_last_of(" \t", end);
  const std::string_view word =
      line.substr(start == std::string_view::npos ? 0 : start + 1, end + 1 - (start + 1));
  if (word.empty() || word.front() < '0' || word.front() > '9')
    return "";
  return std::string(word);
}

Status CheckSlurmVersion(const std::string& binary, std::string_view variable,
                         std::string_view built_for, DaemonSystem& system, Logger& log) {
  auto output = system.Output({binary, "-V"});
  if (!output.ok()) {
    // Slurm's clients read their configuration even for -V: a login container
    // without slurm.conf (and no DNS SRV record for configless) fails here too.
    return Status::NotFound(fmt::format(
        "cannot learn the Slurm version of {} ({}; its own error is above): is it installed "
        "in the image (else set {} to its path), and is there a Slurm configuration (slurm.conf "
        "in SLURM_CONF or /etc/slurm, or a configless DNS SRV record)?",
        binary, output.status().message(), variable));
  }
  const std::string found = SlurmVersionIn(*output);
  if (found.empty()) {
    return Status::InvalidArgument(
        fmt::format("`{} -V` printed no Slurm version ('{}'): {} must name a Slurm program", binary,
                    output->substr(0, output->find('\n')), variable));
  }
  if (found != built_for) {
    return Status::InvalidArgument(fmt::format(
        "Slurm version mismatch: {} is Slurm {}, but this k8sbridge was built for Slurm {}; use "
        "the k8sbridge image built for Slurm {} (or build k8sbridge against it)",
        binary, found, built_for, found));
  }
  log.Info("{} is Slurm {}, the release k8sbridge was built for", binary, found);
  return Status::Ok();
}

}  // namespace k8sbridge::container
