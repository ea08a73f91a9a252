// k8sbridge-power: Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram,
// and the PrologSlurmctld that starts a resumed job as soon as its nodes are up.
//
//   k8sbridge-power [--config FILE] resume|suspend|resume-fail HOSTLIST
//   k8sbridge-power [--config FILE] prolog      (the job from SLURM_JOB_NODELIST)
//   k8sbridge-resume HOSTLIST        (symlinks: the subcommand from the name, which
//   k8sbridge-suspend HOSTLIST        is what slurm.conf's *Program= lines need, since
//   k8sbridge-resume-fail HOSTLIST    Slurm passes only the hostlist, or nothing for
//   k8sbridge-prolog                  PrologSlurmctld)
//
// A thin main: the work is power::Resume/Suspend/ResumeFail (power_actions.h) and
// power::AwaitNodesUp (await_nodes.h).
// Exit status: 0 when every node succeeded, 1 when some failed (each logged, and
// for resume set DOWN/POWER_DOWN in Slurm), 2 for usage, configuration or input
// errors, found before any pod is touched. The prolog exits 0 whatever it finds
// (a PrologSlurmctld's failure would requeue or kill the job).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/program_client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/await_nodes.h"
#include "k8sbridge/power/counters.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/power/resume_file.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/program.h"
#include "k8sbridge/slurm/libslurm.h"
#include "k8sbridge/slurm/libslurm_hostlists.h"

namespace k8sbridge {
namespace {

constexpr int kExitFailedNodes = 1;
constexpr int kExitUsage = 2;

// The log goes to stderr, and to LogFile= once the configuration is read:
// slurmscriptd discards the programs' stderr, so without a file only a manual run
// shows it (ProgramLogger, log.h).

constexpr std::string_view kUsage =
    "usage: k8sbridge-power [--config FILE] resume|suspend|resume-fail HOSTLIST\n"
    "       k8sbridge-power [--config FILE] prolog\n"
    "       k8sbridge-resume|k8sbridge-suspend|k8sbridge-resume-fail HOSTLIST\n"
    "       k8sbridge-prolog\n"
    "       k8sbridge-power --help | --version\n"
    "Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram (the k8sbridge-* names\n"
    "are symlinks to k8sbridge-power): create or delete the worker pods of HOSTLIST.\n"
    "prolog is slurm.conf's PrologSlurmctld: it waits until the nodes of the job\n"
    "(SLURM_JOB_NODELIST) are up, so a job on resumed nodes starts at once.\n"
    "  --config FILE  k8sbridge.conf (default $K8SBRIDGE_CONF, else /etc/slurm/k8sbridge.conf)\n"
    "Exit status: 0 every node succeeded, 1 some nodes failed, 2 usage or configuration;\n"
    "prolog: 0 whatever it finds, 2 only when run outside slurmctld without a job.\n";

void Usage(Logger& log) {
  log.Error("{}", kUsage.substr(0, kUsage.find('\n', kUsage.find("--help"))));
}

// What Slurm (or an admin) asked for.
struct Invocation {
  std::string subcommand;  // resume, suspend, resume-fail or prolog
  std::string config_path;
  std::string hostlist;
};

// The subcommand a symlink's name implies; "" for k8sbridge-power itself.
std::string SubcommandOf(std::string_view program) {
  if (program == "k8sbridge-resume")
    return "resume";
  if (program == "k8sbridge-suspend")
    return "suspend";
  if (program == "k8sbridge-resume-fail")
    return "resume-fail";
  if (program == "k8sbridge-prolog")
    return "prolog";
  return "";
}

// slurmctld runs PrologSlurmctld with no arguments and the job in its environment
// (job_common_env_vars, src/slurmctld/job_mgr.c).
constexpr const char* kEnvJobNodelist = "SLURM_JOB_NODELIST";
constexpr const char* kEnvJobId = "SLURM_JOB_ID";

std::optional<int> ParsePrologJob(const std::vector<std::string>& args, Logger& log,
                                  Invocation& out) {
  if (!args.empty()) {
    log.Error("prolog: takes no arguments (the job's nodes come from {}), got '{}'",
              kEnvJobNodelist, args.front());
    Usage(log);
    return kExitUsage;
  }
  const char* nodelist = std::getenv(kEnvJobNodelist);
  if (nodelist == nullptr || *nodelist == '\0') {
    log.Error(
        "prolog: {} is not set: k8sbridge-prolog is slurm.conf's PrologSlurmctld, run "
        "by slurmctld for each job",
        kEnvJobNodelist);
    return kExitUsage;
  }
  out.hostlist = nodelist;
  return std::nullopt;
}

// The invocation, or the exit code of a usage error (logged with the usage).
std::optional<int> ParseInvocation(std::string_view program, int argc, char** argv, Logger& log,
                                   Invocation& out) {
  out.subcommand = SubcommandOf(program);
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      out.config_path = argv[++i];
    } else if (a.starts_with("--config=")) {
      out.config_path = std::string(a.substr(9));
    } else {
      args.emplace_back(a);
    }
  }
  if (out.subcommand.empty() && !args.empty()) {
    out.subcommand = args.front();
    args.erase(args.begin());
  }
  if (out.subcommand != "resume" && out.subcommand != "suspend" &&
      out.subcommand != "resume-fail" && out.subcommand != "prolog") {
    if (!out.subcommand.empty())
      log.Error("unknown subcommand '{}'", out.subcommand);
    Usage(log);
    return kExitUsage;
  }
  if (out.subcommand == "prolog")
    return ParsePrologJob(args, log, out);
  if (args.size() != 1 || args[0].empty()) {
    log.Error("{}: expected exactly one HOSTLIST argument, got {}", out.subcommand, args.size());
    Usage(log);
    return kExitUsage;
  }
  out.hostlist = args[0];
  return std::nullopt;
}

// The resume file is a memfd that vanishes when slurmctld is done with us: it is
// copied before anything else can take time. A failure to read it fails the nodes
// later, once the hostlist is known; no file at all is only warned about.
std::optional<Result<std::string>> CopyResumeFile(std::string& resume_path, Logger& log) {
  if (const char* p = std::getenv("SLURM_RESUME_FILE"); p && *p) {
    resume_path = p;
    return power::ReadResumeFile(resume_path);
  }
  log.Warning(
      "SLURM_RESUME_FILE is not set (not run by slurmctld?): pods get no job labels and no "
      "feature placement");
  return std::nullopt;
}

// power::Resume/Suspend retry 429/5xx themselves, bounded by RetryDeadline.
Result<std::unique_ptr<kube::Client>> PowerClient(const conf::BridgeConfig& config, Logger& log) {
  kube::ClientOptions options = kube::ProgramClientOptions(config.kube, log);
  options.max_retries = 0;
  return kube::MakeClient(config.kube, config.file, options);
}

// resume-fail reports on the pods with Events.
std::unique_ptr<kube::EventRecorder> EventsFor(const std::string& subcommand,
                                               kube::Client& client) {
  if (subcommand != "resume-fail")
    return nullptr;
  kube::EventRecorderOptions eo;
  eo.reporting_controller = contract::kPowerController;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  eo.reporting_instance = host;
  return std::make_unique<kube::EventRecorder>(client, eo);
}

// resume checks the worker's munge key against the munged slurmctld uses.
std::unique_ptr<container::LibMungeCodec> MungeCodecFor(const std::string& subcommand,
                                                        const conf::BridgeConfig& config,
                                                        slurm::Slurm& libslurm, Logger& log) {
  if (subcommand != "resume" || !config.power.munge_check)
    return nullptr;
  std::string socket = config.power.munge_socket;
  if (socket.empty()) {
    // The munged slurmctld authenticates with, as its configuration names it.
    auto from_slurm = libslurm.MungeSocket();
    if (from_slurm.ok()) {
      socket = *from_slurm;
    } else {
      log.Warning("{}; the munge check uses libmunge's default socket (set MungeSocket=)",
                  from_slurm.status().message());
    }
  }
  return std::make_unique<container::LibMungeCodec>(socket);
}

// Counts the run in PowerMetricsFile= (power/counters.h), where k8sbridge-sync
// serves it from: this program lives too briefly to serve anything itself.
class RunCounter {
 public:
  RunCounter(std::string subcommand, Logger& log)
      : subcommand_(std::move(subcommand)), log_(log), started_(std::chrono::steady_clock::now()) {}
  void SetFile(std::string path) { path_ = std::move(path); }
  void Count(uint64_t nodes_ok, uint64_t nodes_failed, bool gave_up) {
    if (path_.empty())
      return;
    power::CallOutcome run{subcommand_, nodes_ok, nodes_failed, gave_up,
                           std::chrono::steady_clock::now() - started_};
    if (Status s = power::AddPowerCall(path_, run); !s.ok())
      log_.Warning("PowerMetricsFile: {}", s.message());
  }

 private:
  std::string subcommand_, path_;
  Logger& log_;
  std::chrono::steady_clock::time_point started_;
};

// The subcommand's work on `nodes`, once everything is set up; the exit code.
int RunSubcommand(const Invocation& inv, power::PowerContext& ctx,
                  const std::vector<std::string>& nodes, const power::ResumeRequest& request,
                  kube::EventRecorder* events, RunCounter& counter, Logger& log) {
  log.Info("{} {} ({} node(s)), namespace {}", inv.subcommand, inv.hostlist, nodes.size(),
           ctx.setup.config.kube.namespace_);
  power::PowerReport report;
  if (inv.subcommand == "resume")
    report = power::Resume(ctx, nodes, request);
  else if (inv.subcommand == "suspend")
    report = power::Suspend(ctx, nodes);
  else
    report = power::ResumeFail(ctx, nodes);
  if (events)
    events->Flush(std::chrono::seconds(5));
  const size_t failed = report.Failed();
  log.Info("{} {}: {} node(s) done, {} failed", inv.subcommand, inv.hostlist,
           report.nodes.size() - failed, failed);
  counter.Count(report.nodes.size() - failed, failed, false);
  return failed == 0 ? 0 : kExitFailedNodes;
}

// PrologSlurmctld: waits for the job's nodes, logs what it found, exits 0 (a
// non-zero exit would requeue or kill the job: the wait only ever speeds it up).
int RunProlog(const Invocation& inv, const std::vector<std::string>& nodes, ProgramLogger& log) {
  // LogFile= of k8sbridge.conf, if it loads: the prolog needs nothing else from it.
  auto config = conf::LoadBridgeConfig(inv.config_path, slurm::SlurmHostlists());
  if (config.ok() && !config->power.log_file.empty())
    (void)log.OpenFile(config->power.log_file);
  std::unique_ptr<slurm::Slurm> libslurm = slurm::NewLibslurm();
  power::AwaitOptions options;
  options.limit = power::AwaitLimit(libslurm->LoadTimeouts());
  const auto report = power::AwaitNodesUp(*libslurm, RealClock::Instance(), nodes, options);
  const char* job = std::getenv(kEnvJobId);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(report.waited);
  if (report.outcome == power::AwaitOutcome::kUp) {
    if (waited.count() > 0) {
      log.Info("prolog: job {}: {} up after {} ms ({} reads)", job ? job : "?", inv.hostlist,
               waited.count(), report.reads);
    }
    return 0;
  }
  log.Warning("prolog: job {}: {}: {} after {} ms{}; Slurm decides when the job starts",
              job ? job : "?", AwaitOutcomeName(report.outcome), report.node, waited.count(),
              report.last_error.ok() ? "" : " (" + report.last_error.message() + ")");
  return 0;
}

int Run(int argc, char** argv) {
  std::string_view program = argv[0];
  if (auto slash = program.rfind('/'); slash != std::string_view::npos)
    program.remove_prefix(slash + 1);
  if (auto answered = AnswerHelpOrVersion(argc, argv, "k8sbridge-power", kUsage))
    return *answered;
  ProgramLogger log(std::string(program.empty() ? "k8sbridge-power" : program));
  Invocation inv;
  if (auto wrong = ParseInvocation(program, argc, argv, log, inv))
    return *wrong;
  std::optional<Result<std::string>> resume_json;
  std::string resume_path;
  if (inv.subcommand == "resume")
    resume_json = CopyResumeFile(resume_path, log);
  if (inv.config_path.empty())
    inv.config_path = conf::DefaultConfigPath();
  slurm::SlurmHostlists hostlists;
  auto nodes = hostlists.Expand(inv.hostlist);
  if (!nodes.ok()) {
    if (inv.subcommand == "prolog") {
      log.Error("prolog: {}: {}", kEnvJobNodelist, nodes.status().message());
      return 0;
    }
    log.Error("HOSTLIST argument: {}", nodes.status().message());
    return kExitUsage;
  }
  if (inv.subcommand == "prolog")
    return RunProlog(inv, *nodes, log);
  std::unique_ptr<slurm::Slurm> libslurm = slurm::NewLibslurm();
  // slurmscriptd always sets SLURM_CONF; without it (a manual run) libslurm would
  // go looking for a configuration server, so Slurm is left alone.
  const char* slurm_conf = std::getenv("SLURM_CONF");
  slurm::Slurm* reachable =
      slurm_conf != nullptr && access(slurm_conf, R_OK) == 0 ? libslurm.get() : nullptr;
  // A resume that cannot even start fails its nodes at once (no pod is touched),
  // so Slurm requeues the jobs now instead of after ResumeTimeout.
  RunCounter counter(inv.subcommand, log);
  auto give_up = [&](const Status& why) {
    log.Error("{}", why.message());
    counter.Count(0, nodes->size(), true);
    if (inv.subcommand == "resume")
      power::FailNodes(reachable, *nodes, why, log);
    return kExitUsage;
  };
  auto request =
      power::ResumeRequestOrFail(resume_json, resume_path, *nodes, hostlists, reachable, log);
  if (!request.ok())
    return kExitUsage;
  auto config = conf::LoadBridgeConfig(inv.config_path, hostlists);
  if (!config.ok())
    return give_up(config.status());
  if (!config->power.log_file.empty()) {
    if (Status s = log.OpenFile(config->power.log_file); !s.ok())
      log.Warning("{}: {}", config->file, s.message());
  }
  counter.SetFile(config->power.metrics_file);
  auto setup = power::LoadPowerSetup(std::move(*config));
  if (!setup.ok())
    return give_up(setup.status());
  auto client = PowerClient(setup->config, log);
  if (!client.ok())
    return give_up(client.status());
  auto events = EventsFor(inv.subcommand, **client);
  auto munge = MungeCodecFor(inv.subcommand, setup->config, *libslurm, log);
  power::PowerContext ctx{*setup, **client, *libslurm, log, events.get(), munge.get()};
  return RunSubcommand(inv, ctx, *nodes, *request, events.get(), counter, log);
}

}  // namespace
}  // namespace k8sbridge

int main(int argc, char** argv) {
  return k8sbridge::Run(argc, argv);
}
