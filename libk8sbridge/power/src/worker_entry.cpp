#include "k8sbridge/power/worker_entry.h"

#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {
namespace {

constexpr auto kJailPollInterval = std::chrono::milliseconds(250);

std::string Env(const std::function<const char*(const char*)>& getenv, std::string_view name) {
  const char* v = getenv(std::string(name).c_str());
  return v ? std::string(v) : std::string();
}

Status NeedAbsolute(std::string_view variable, const std::string& value, std::string_view what) {
  if (!value.empty() && value.front() != '/') {
    return Status::InvalidArgument(
        fmt::format("{}='{}' is not an absolute path: give the path of {}", variable, value, what));
  }
  return Status::Ok();
}

std::string Dir(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string SocketOf(const WorkerSettings& s) {
  return s.munge_socket.empty() ? std::string(kDefaultMungeSocket) : s.munge_socket;
}

// Starts the pod's munged; returns its pid file, so a failing worker can stop it.
Result<std::string> StartPodMunged(const WorkerSettings& s, WorkerSystem& system, Logger& log) {
  // Two directories of the pod's own (emptyDirs), never the image's /run/munge,
  // /var/lib/munge or /var/log/munge: the socket's, which k8sbridge-jail-prepare
  // binds into every job's jail, holds only the socket (0755 so jobs reach it);
  // the key, the seed, the pid and the log stay in a root-only one outside it.
  // Owners and modes then satisfy munged's own checks: no --force.
  const std::string socket = SocketOf(s);
  const std::string socket_dir = Dir(socket);
  const std::string& dir = s.munged_dir;
  if (Status st = system.MakeDirectory(socket_dir, 0755); !st.ok())
    return st.WithContext(fmt::format("preparing the munge socket directory {}", socket_dir));
  if (Status st = system.MakeDirectory(dir, 0700); !st.ok())
    return st.WithContext(
        fmt::format("preparing munged's private directory {} ({})", dir, contract::kEnvMungedDir));
  const std::string key = dir + "/munge.key";
  const std::string pid_file = dir + "/munged.pid";
  if (Status st = system.CopyPrivateFile(s.munged_key, key); !st.ok()) {
    return st.WithContext(fmt::format(
        "{}={}: copying the munge key (mount the Secret with the cluster's munge.key there)",
        contract::kEnvMungedKey, s.munged_key));
  }
  std::vector<std::string> argv = {s.munged,
                                   "--key-file=" + key,
                                   "--socket=" + socket,
                                   "--pid-file=" + pid_file,
                                   "--seed-file=" + dir + "/munged.seed",
                                   "--log-file=" + dir + "/munged.log"};
  log.Info("starting the pod's munged: socket {}, key {}", socket, key);
  if (Status st = system.Run(argv); !st.ok())
    return st.WithContext(fmt::format("starting munged (its log: {}/munged.log)", dir));
  return pid_file;
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

Status CheckMungedDir(const WorkerSettings& s) {
  const std::string socket_dir = Dir(SocketOf(s));
  if (!Within(s.munged_dir, socket_dir) && !Within(socket_dir, s.munged_dir))
    return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "{}={} and the munge socket's directory {} ({}) must not contain one another: the "
      "socket's directory is bound into every job's jail, and the key must stay out of it; "
      "use a directory of its own such as {}",
      contract::kEnvMungedDir, s.munged_dir, socket_dir, contract::kEnvMungeSocket,
      kDefaultMungedDir));
}

Status CheckMungeKey(const WorkerSettings& s, MungeCodec& munge, Logger& log) {
  if (s.munge_credential.empty()) {
    log.Warning(
        "{} is not set: the munge key is not checked (MungeCheck=no in k8sbridge.conf, or a pod "
        "not made by k8sbridge-power); a wrong key shows only as a node that never registers",
        contract::kEnvMungeCheck);
    return Status::Ok();
  }
  const std::string socket = s.munge_socket.empty() ? "libmunge's default socket" : s.munge_socket;
  MungeDecoded d = munge.Decode(s.munge_credential);
  switch (d.verdict) {
    case MungeDecoded::Verdict::kValid:
    case MungeDecoded::Verdict::kValidButStale:
      break;
    case MungeDecoded::Verdict::kKeyMismatch:
      return Status::PermissionDenied(fmt::format(
          "munge key mismatch: this pod's munged ({}) cannot decode the credential that the "
          "controller's munged made at resume ({}); the pod holds a different munge.key than "
          "slurmctld. Mount the controller's key (the Secret in the pod template) and let Slurm "
          "resume the node again",
          socket, d.detail));
    case MungeDecoded::Verdict::kUnavailable:
      return Status::Unavailable(fmt::format(
          "cannot check the munge key: no munged answers at {} ({}); run munged in the pod "
          "(set {} to the key's path to let k8sbridge-worker start it) or fix {}",
          socket, d.detail, contract::kEnvMungedKey, contract::kEnvMungeSocket));
    case MungeDecoded::Verdict::kMalformed:
      return Status::InvalidArgument(fmt::format(
          "{} does not hold a munge credential ({}): the pod was not rendered by k8sbridge-power",
          contract::kEnvMungeCheck, d.detail));
  }
  const std::string expected = MungeCheckPayload(s.cluster);
  if (d.payload != expected) {
    return Status::PermissionDenied(fmt::format(
        "the munge check credential was made for '{}', not for this pod's cluster ('{}'): the "
        "pod's environment was copied from another cluster; let Slurm resume this node again",
        d.payload, expected));
  }
  if (d.verdict == MungeDecoded::Verdict::kValidButStale) {
    log.Info("munge key matches the controller's (the credential itself is stale: {})", d.detail);
  } else {
    log.Info("munge key matches the controller's");
  }
  return Status::Ok();
}

Status WaitForJail(const WorkerSettings& s, WorkerSystem& system, Logger& log) {
  Clock& clock = system.clock();
  const auto deadline = clock.Now() + s.jail_wait;
  bool said = false;
  for (;;) {
    auto mounted = system.IsMountedRootfs(s.jail);
    if (mounted.ok() && *mounted) {
      log.Info("jail {} is mounted", s.jail);
      return Status::Ok();
    }
    if (clock.Now() >= deadline) {
      std::string why = mounted.ok() ? "it is not a mount point holding a root filesystem (usr/)"
                                     : mounted.status().message();
      return Status::Timeout(fmt::format(
          "jail {} is not mounted after {} s: {}; check the pod template's volume for it (is "
          "the claim bound and the file server reachable?) or raise {}",
          s.jail, std::chrono::duration_cast<std::chrono::seconds>(s.jail_wait).count(), why,
          contract::kEnvJailWait));
    }
    if (!said) {
      log.Info("waiting up to {} s for the jail {} to be mounted",
               std::chrono::duration_cast<std::chrono::seconds>(s.jail_wait).count(), s.jail);
      said = true;
    }
    clock.SleepFor(kJailPollInterval);
  }
}

std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

}  // namespace

Result<WorkerSettings> WorkerSettingsFromEnv(const std::function<const char*(const char*)>& getenv,
                                             std::vector<std::string> args) {
  WorkerSettings s;
  s.node = Env(getenv, contract::kEnvNodeName);
  if (s.node.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} is not set: k8sbridge-worker runs as the command of a worker pod rendered by "
        "k8sbridge-power, which sets it to the Slurm node name",
        contract::kEnvNodeName));
  }
  s.cluster = Env(getenv, contract::kEnvCluster);
  s.munge_credential = Env(getenv, contract::kEnvMungeCheck);
  s.munge_socket = Env(getenv, contract::kEnvMungeSocket);
  s.munged_key = Env(getenv, contract::kEnvMungedKey);
  if (std::string v = Env(getenv, contract::kEnvMunged); !v.empty())
    s.munged = v;
  s.jail = Env(getenv, contract::kEnvJail);
  if (std::string v = Env(getenv, contract::kEnvJailWait); !v.empty()) {
    auto d = text::ParseDuration(v);
    if (!d.ok())
      return d.status().WithContext(std::string(contract::kEnvJailWait));
    s.jail_wait = *d;
  }
  s.jail_prepare = Env(getenv, contract::kEnvJailPrepare);
  if (!s.jail_prepare.empty() && SplitWords(s.jail_prepare).empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} holds only white space: give the jail-prepare command and its arguments (e.g. "
        "\"/usr/sbin/k8sbridge-jail-prepare --munge-dir /run/munge\"), or unset it to prepare "
        "no jail",
        contract::kEnvJailPrepare));
  }
  if (std::string v = Env(getenv, contract::kEnvMungedDir); !v.empty())
    s.munged_dir = WithoutTrailingSlashes(v);
  if (std::string v = Env(getenv, contract::kEnvSlurmd); !v.empty())
    s.slurmd = v;
  s.conf_server = Env(getenv, contract::kEnvConfServer);
  s.slurmd_args = std::move(args);
  for (const auto& [variable, value, what] :
       {std::tuple{contract::kEnvMungeSocket, s.munge_socket, "munged's socket"},
        std::tuple{contract::kEnvMungedKey, s.munged_key, "the munge key file"},
        std::tuple{contract::kEnvMunged, s.munged, "munged"},
        std::tuple{contract::kEnvMungedDir, s.munged_dir, "munged's private directory"},
        std::tuple{contract::kEnvJail, s.jail, "the jail's mount point"},
        std::tuple{contract::kEnvSlurmd, s.slurmd, "slurmd"}}) {
    if (Status st = NeedAbsolute(variable, value, what); !st.ok())
      return st;
  }
  if (!s.munged_key.empty()) {
    if (Status st = CheckMungedDir(s); !st.ok())
      return st;
  }
  if (!s.jail_prepare.empty() && s.jail.empty()) {
    return Status::InvalidArgument(fmt::format("{} is set but {} is not: say which jail to prepare",
                                               contract::kEnvJailPrepare, contract::kEnvJail));
  }
  return s;
}

std::vector<std::string> SlurmdCommand(const WorkerSettings& s) {
  // -b: a pod is always a fresh boot; slurmctld then accepts the node's new
  // address and clears a pending reboot (see docs/power.md).
  std::vector<std::string> argv = {s.slurmd, "-D", "-b", "-N", s.node};
  if (!s.conf_server.empty()) {
    argv.push_back("--conf-server");
    argv.push_back(s.conf_server);
  }
  argv.insert(argv.end(), s.slurmd_args.begin(), s.slurmd_args.end());
  return argv;
}

Status RunWorker(const WorkerSettings& s, WorkerSystem& system, MungeCodec& munge, Logger& log) {
  log.Info("worker for Slurm node {} (cluster {})", s.node, s.cluster.empty() ? "?" : s.cluster);
  std::string munged_pid_file;
  if (!s.munged_key.empty()) {
    auto pid_file = StartPodMunged(s, system, log);
    if (!pid_file.ok())
      return pid_file.status();
    munged_pid_file = std::move(*pid_file);
  }
  // The worker fails: the munged it started must not outlive it.
  auto failed = [&](Status st) {
    if (!munged_pid_file.empty())
      system.StopDaemon(munged_pid_file);
    return st;
  };
  if (Status st = CheckMungeKey(s, munge, log); !st.ok())
    return failed(st);
  if (!s.jail.empty()) {
    if (Status st = WaitForJail(s, system, log); !st.ok())
      return failed(st);
    if (!s.jail_prepare.empty()) {
      std::vector<std::string> argv = SplitWords(s.jail_prepare);
      argv.insert(argv.begin() + 1, {"--jail", s.jail});
      if (Status st = system.Run(argv); !st.ok())
        return failed(st.WithContext(
            fmt::format("preparing the jail {} ({})", s.jail, contract::kEnvJailPrepare)));
    }
  }
  std::vector<std::string> argv = SlurmdCommand(s);
  log.Info("exec {}", fmt::join(argv, " "));
  Status exec = system.Exec(argv);
  return exec.ok() ? exec : failed(exec.WithContext(fmt::format("exec {}", s.slurmd)));
}

}  // namespace k8sbridge::power
