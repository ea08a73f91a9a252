#include "k8sbridge/container/entrypoint.h"

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "k8sbridge/contract.h"
#include "k8sbridge/program.h"

namespace k8sbridge::container {
namespace {

std::string SlurmConf(const EntrypointSettings& s) {
  return s.conf_dir + "/slurm.conf";
}

// A ConfigMap volume is a directory whose entries are symlinks into its ..data/
// (an atomic swap on update): stat follows them, so a mounted one passes.
Status CheckSlurmConfDir(const EntrypointSettings& s, DaemonSystem& system) {
  const FileFacts dir = system.Inspect(s.conf_dir);
  if (!dir.exists || !dir.is_directory) {
    return Status::NotFound(fmt::format(
        "Slurm configuration directory {} is {}: mount the ConfigMap with slurm.conf there, or "
        "set {} to where it is",
        s.conf_dir, dir.exists ? "not a directory" : "missing (" + dir.error + ")",
        contract::kEnvSlurmConfDir));
  }
  const std::string conf = SlurmConf(s);
  const FileFacts file = system.Inspect(conf);
  if (!file.exists || file.is_directory) {
    return Status::NotFound(fmt::format(
        "no slurm.conf in the Slurm configuration directory {} ({}): give the ConfigMap mounted "
        "there a slurm.conf key, or set {} to the directory that has it",
        s.conf_dir, file.exists ? conf + " is a directory" : file.error,
        contract::kEnvSlurmConfDir));
  }
  if (!file.readable) {
    return Status::PermissionDenied(fmt::format(
        "{} cannot be read ({}): give the ConfigMap volume a mode this container's user can read",
        conf, file.error));
  }
  return Status::Ok();
}

Result<EntrypointRole> RoleOf(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "controller")
    return EntrypointRole::kController;
  if (!args.empty() && args[0] == "login")
    return EntrypointRole::kLogin;
  return Status::InvalidArgument(fmt::format(
      "{}: say which container this is: k8sbridge-entrypoint controller [SLURMCTLD-ARGS...] or "
      "k8sbridge-entrypoint login [COMMAND...]",
      args.empty() ? std::string("no role given") : "unknown role '" + args[0] + "'"));
}

// slurmscriptd gives the power programs SLURM_CONF alone: InCluster=yes finds the
// API server in this file instead (kube::InClusterConfigFromEnv).
Status WriteServiceFile(const EntrypointSettings& s, DaemonSystem& system, Logger& log) {
  if (s.service_host.empty() || s.service_port.empty()) {
    log.Info(
        "KUBERNETES_SERVICE_HOST/_PORT are not set (not in a pod): the power programs need "
        "Kubeconfig= in k8sbridge.conf");
    return Status::Ok();
  }
  const std::string dir = std::filesystem::path(s.service_file).parent_path().string();
  if (Status st = system.MakeDirectory(dir, 0755); !st.ok())
    return st.WithContext("the in-cluster service file's directory");
  return system.WriteFile(s.service_file,
                          fmt::format("KUBERNETES_SERVICE_HOST={}\nKUBERNETES_SERVICE_PORT={}\n",
                                      s.service_host, s.service_port),
                          0644);
}

}  // namespace

Result<EntrypointSettings> EntrypointSettingsFromEnv(const Getenv& getenv,
                                                     std::vector<std::string> args) {
  auto role = RoleOf(args);
  if (!role.ok())
    return role.status();
  EntrypointSettings s;
  s.role = *role;
  auto munged = MungedSettingsFromEnv(getenv, std::string(kDefaultMungeKey));
  if (!munged.ok())
    return munged.status();
  s.munged = std::move(*munged);
  s.conf_dir = EnvOr(getenv, contract::kEnvSlurmConfDir, s.conf_dir);
  while (s.conf_dir.size() > 1 && s.conf_dir.back() == '/')
    s.conf_dir.pop_back();
  s.slurmctld = EnvOr(getenv, contract::kEnvSlurmctld, s.slurmctld);
  s.srun = EnvOr(getenv, contract::kEnvSrun, s.srun);
  for (const auto& [variable, value, what] :
       {std::tuple{contract::kEnvSlurmConfDir, s.conf_dir, "the Slurm configuration directory"},
        std::tuple{contract::kEnvSlurmctld, s.slurmctld, "slurmctld"},
        std::tuple{contract::kEnvSrun, s.srun, "srun"}}) {
    if (Status st = NeedAbsolutePath(variable, value, what); !st.ok())
      return st;
  }
  s.slurm_version = std::string(BuiltForSlurm());
  auto forced = InitForcedFromEnv(getenv);
  if (!forced.ok())
    return forced.status();
  s.supervise = *forced;
  s.service_host = EnvOr(getenv, "KUBERNETES_SERVICE_HOST");
  s.service_port = EnvOr(getenv, "KUBERNETES_SERVICE_PORT");
  s.args.assign(args.begin() + 1, args.end());
  return s;
}

std::vector<std::string> EntrypointCommand(const EntrypointSettings& s) {
  if (s.role == EntrypointRole::kLogin)
    return s.args.empty() ? std::vector<std::string>{"sleep", "infinity"} : s.args;
  std::vector<std::string> argv = {s.slurmctld, "-D", "-f", SlurmConf(s)};
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  return argv;
}

Result<int> RunEntrypoint(const EntrypointSettings& s, DaemonSystem& system, Logger& log) {
  const bool controller = s.role == EntrypointRole::kController;
  log.Info("{} container", controller ? "controller" : "login");
  // The checks that need nothing started come first: a failure leaves nothing behind.
  if (Status st = CheckMungeKeyFile(s.munged.key, system); !st.ok())
    return st;
  if (controller) {
    if (Status st = CheckSlurmConfDir(s, system); !st.ok())
      return st;
  }
  const std::string& versioned = controller ? s.slurmctld : s.srun;
  if (Status st =
          CheckSlurmVersion(versioned, controller ? contract::kEnvSlurmctld : contract::kEnvSrun,
                            s.slurm_version, system, log);
      !st.ok())
    return st;
  if (controller) {
    if (Status st = WriteServiceFile(s, system, log); !st.ok())
      return st;
  }
  auto munged_pid_file = StartPrivateMunged(s.munged, system, log);
  if (!munged_pid_file.ok())
    return munged_pid_file.status();
  const std::vector<std::string> argv = EntrypointCommand(s);
  if (s.supervise) {
    log.Info("running {} as PID 1's child", fmt::join(argv, " "));
    return system.Supervise(argv, *munged_pid_file);
  }
  log.Info("exec {}", fmt::join(argv, " "));
  if (Status st = system.Exec(argv); !st.ok()) {
    system.StopDaemon(*munged_pid_file);
    return st.WithContext(fmt::format("exec {}", argv[0]));
  }
  return 0;
}

}  // namespace k8sbridge::container
