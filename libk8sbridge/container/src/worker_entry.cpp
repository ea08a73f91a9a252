#include "k8sbridge/container/worker_entry.h"

#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "k8sbridge/contract.h"
#include "k8sbridge/program.h"
#include "k8sbridge/text.h"

namespace k8sbridge::container {
namespace {

constexpr auto kJailPollInterval = std::chrono::milliseconds(250);

Status CheckMungeKey(const WorkerSettings& s, MungeCodec& munge, Logger& log) {
  if (s.munge_credential.empty()) {
    log.Warning(
        "{} is not set: the munge key is not checked (MungeCheck=no in k8sbridge.conf, or a pod "
        "not made by k8sbridge-power); a wrong key shows only as a node that never registers",
        contract::kEnvMungeCheck);
    return Status::Ok();
  }
  const std::string socket = MungeSocketOf(s.munged);
  MungeDecoded d = munge.Decode(s.munge_credential);
  switch (d.verdict) {
    case MungeDecoded::Verdict::kValid:
    case MungeDecoded::Verdict::kValidButStale:
      break;
    case MungeDecoded::Verdict::kKeyMismatch:
      return Status::PermissionDenied(fmt::format(
          "munge key mismatch: this pod holds the wrong munge.key, not slurmctld's: its munged "
          "({}) cannot decode the credential the controller's munged made at resume ({}); mount "
          "the controller's key (the Secret in the pod template) and let Slurm resume the node "
          "again",
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

Result<WorkerSettings> WorkerSettingsFromEnv(const Getenv& getenv, std::vector<std::string> args) {
  WorkerSettings s;
  s.node = EnvOr(getenv, contract::kEnvNodeName);
  if (s.node.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} is not set: k8sbridge-worker runs as the command of a worker pod rendered by "
        "k8sbridge-power, which sets it to the Slurm node name",
        contract::kEnvNodeName));
  }
  s.cluster = EnvOr(getenv, contract::kEnvCluster);
  s.munge_credential = EnvOr(getenv, contract::kEnvMungeCheck);
  // No key: the pod runs its munged itself (or shares the node's); none is started.
  auto munged = MungedSettingsFromEnv(getenv, "");
  if (!munged.ok())
    return munged.status();
  s.munged = std::move(*munged);
  s.jail = EnvOr(getenv, contract::kEnvJail);
  if (std::string v = EnvOr(getenv, contract::kEnvJailWait); !v.empty()) {
    auto d = text::ParseDuration(v);
    if (!d.ok())
      return d.status().WithContext(std::string(contract::kEnvJailWait));
    s.jail_wait = *d;
  }
  s.jail_prepare = EnvOr(getenv, contract::kEnvJailPrepare);
  if (!s.jail_prepare.empty() && SplitWords(s.jail_prepare).empty()) {
    return Status::InvalidArgument(fmt::format(
        "{} holds only white space: give the jail-prepare command and its arguments (e.g. "
        "\"/usr/sbin/k8sbridge-jail-prepare --munge-dir /run/munge\"), or unset it to prepare "
        "no jail",
        contract::kEnvJailPrepare));
  }
  s.slurmd = EnvOr(getenv, contract::kEnvSlurmd, s.slurmd);
  s.slurm_version = std::string(BuiltForSlurm());
  s.conf_server = EnvOr(getenv, contract::kEnvConfServer);
  s.slurmd_args = std::move(args);
  for (const auto& [variable, value, what] :
       {std::tuple{contract::kEnvJail, s.jail, "the jail's mount point"},
        std::tuple{contract::kEnvSlurmd, s.slurmd, "slurmd"}}) {
    if (Status st = NeedAbsolutePath(variable, value, what); !st.ok())
      return st;
  }
  if (!s.jail_prepare.empty() && s.jail.empty()) {
    return Status::InvalidArgument(fmt::format("{} is set but {} is not: say which jail to prepare",
                                               contract::kEnvJailPrepare, contract::kEnvJail));
  }
  auto forced = InitForcedFromEnv(getenv);
  if (!forced.ok())
    return forced.status();
  s.supervise = *forced;
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

Result<int> RunWorker(const WorkerSettings& s, WorkerSystem& system, MungeCodec& munge,
                      Logger& log) {
  log.Info("worker for Slurm node {} (cluster {})", s.node, s.cluster.empty() ? "?" : s.cluster);
  if (Status st = CheckSlurmVersion(s.slurmd, contract::kEnvSlurmd, s.slurm_version, system, log);
      !st.ok())
    return st;
  std::string munged_pid_file;
  if (!s.munged.key.empty()) {
    auto pid_file = StartPrivateMunged(s.munged, system, log);
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
  if (s.supervise) {
    log.Info("running {} as PID 1's child", fmt::join(argv, " "));
    return system.Supervise(argv, munged_pid_file);
  }
  log.Info("exec {}", fmt::join(argv, " "));
  Status exec = system.Exec(argv);
  if (!exec.ok())
    return failed(exec.WithContext(fmt::format("exec {}", s.slurmd)));
  return 0;
}

}  // namespace k8sbridge::container
