// k8sbridge-health: Slurm's HealthCheckProgram for GPU nodes.
//
//   k8sbridge-health [--config FILE] [--node NAME] [--diagnose]
//
// Exit codes: 0 healthy; 1 a check failed (the node was drained, or already is);
// 2 bad configuration or arguments; 3 Slurm could not be read, so nothing was
// changed; 4 the run overran its total deadline. docs/health.md has the details.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/config.h"
#include "k8sbridge/health/publish.h"
#include "k8sbridge/health/runner.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/program_client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/slurm/libslurm.h"

using namespace k8sbridge;
using namespace k8sbridge::health;

namespace {

constexpr int kHealthy = 0, kUnhealthy = 1, kUsage = 2, kSlurmUnreadable = 3, kOverran = 4;

struct Args {
  std::string config = "/etc/slurm/k8sbridge-health.conf";
  std::string node;
  bool diagnose = false;
};

constexpr std::string_view kUsageText =
    "usage: k8sbridge-health [--config FILE] [--node NAME] [--diagnose]\n"
    "       k8sbridge-health --help | --version\n"
    "  --config FILE  settings (default /etc/slurm/k8sbridge-health.conf)\n"
    "  --node NAME    the Slurm node (default $SLURMD_NODENAME, else the hostname)\n"
    "  --diagnose     print every check with its value and verdict; change nothing\n";

void Usage(FILE* out) {
  std::fwrite(kUsageText.data(), 1, kUsageText.size(), out);
}

void OnAlarm(int) {
  static const char msg[] =
      "k8sbridge-health: error: total deadline passed; exiting before Slurm kills us\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  _exit(kOverran);
}

void PrintDiagnosis(const Report& r, const std::string& node) {
  std::printf("%-18s %-22s %-8s %s\n", "CHECK", "SUBJECT", "VERDICT", "VALUE");
  for (const auto& o : r.observations)
    std::printf("%-18s %-22s %-8s %s\n", o.check.c_str(), o.subject.c_str(), o.ok ? "ok" : "FAIL",
                o.value.c_str());
  if (r.findings.empty())
    std::printf("\nnode %s: healthy\n", node.c_str());
  else
    std::printf("\nnode %s: would drain with reason: %s\n", node.c_str(),
                DrainReason(r.findings).c_str());
}

// Best effort and bounded by KubeTimeout: Slurm already has the verdict.
void Publish(const HealthConfig& config, const Report& report, Logger& log) {
  std::string k8s_node = config.kube_node;
  if (k8s_node.empty()) {
    if (const char* n = std::getenv(contract::kEnvHostNode.data()))
      k8s_node = n;
  }
  if (k8s_node.empty()) {
    log.Warning(
        "{}: KubePublish=yes but the Kubernetes node is unknown: set KubeNode=, or run "
        "in a worker pod (K8SBRIDGE_HOST_NODE)",
        config.file);
    return;
  }
  conf::KubeConf connection;  // Kubeconfig= only: no context, plain http refused
  connection.kubeconfig = config.kubeconfig;
  kube::ClientOptions options;
  options.logger = &log;
  options.max_retries = 0;
  options.connect_timeout = config.kube_timeout;
  options.request_timeout = config.kube_timeout;
  auto client = kube::MakeClient(connection, config.file, options);
  if (!client.ok()) {
    log.Warning("not publishing to Kubernetes: {}", client.status().message());
    return;
  }
  kube::EventRecorderOptions eo;
  eo.reporting_controller = contract::kHealthController;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  eo.reporting_instance = host;
  kube::EventRecorder events(**client, eo);
  auto published =
      PublishCondition(**client, &events, k8s_node, config.kube_condition_type, report.findings);
  events.Flush(config.kube_timeout);
  if (!published.ok()) {
    log.Warning("not published to Kubernetes: {}", published.status().message());
    return;
  }
  log.Info("Kubernetes node {}: condition {}={}{}", k8s_node, config.kube_condition_type,
           published->status, published->changed ? " (changed)" : "");
}

// false (having said why) on an argument it does not know.
bool ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--config" || a == "--node") && i + 1 < argc) {
      (a == "--config" ? args.config : args.node) = argv[++i];
    } else if (a == "--diagnose") {
      args.diagnose = true;
    } else {
      std::fprintf(stderr, "k8sbridge-health: unknown argument '%s'\n", a.c_str());
      Usage(stderr);
      return false;
    }
  }
  return true;
}

// $SLURMD_NODENAME (slurmd sets it for HealthCheckProgram), else the short hostname.
std::string DefaultNodeName() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n && *n)
    return n;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host).substr(0, std::string(host).find('.'));
}

// Drains or resumes the node on the checks' findings, and keeps the clean-run count.
int ApplyVerdict(const std::string& node, const HealthConfig& config, const Report& report,
                 HealthState& state, const std::string& state_path, slurm::Slurm& slurm,
                 Logger& log) {
  auto [d, applied] = DecideAndApply(node, report.findings, state.clean_runs,
                                     config.resume_after_clean_runs, slurm);
  state.clean_runs = d.clean_runs;
  if (Status saved = SaveState(state_path, state); !saved.ok())
    log.Warning("{}; the clean-run count will restart", saved.message());
  if (!applied.ok()) {
    log.Error("node {}: {} failed: {}", node, ActionName(d.action), applied.message());
    return kSlurmUnreadable;
  }
  for (const auto& f : report.findings)
    log.Error("{}: {} {}", f.check, f.subject, f.message);
  log.Info("node {}: {} ({})", node, ActionName(d.action), d.explanation);
  if (config.kube_publish)
    Publish(config, report, log);
  return report.findings.empty() ? kHealthy : kUnhealthy;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto answered = AnswerHelpOrVersion(argc, argv, "k8sbridge-health", kUsageText))
    return *answered;
  Args args;
  if (!ParseArgs(argc, argv, args))
    return kUsage;
  StderrLogger log("k8sbridge-health");
  if (args.node.empty())
    args.node = DefaultNodeName();
  auto config = LoadHealthConfig(args.config);
  if (!config.ok()) {
    log.Error("{}", config.status().message());
    return kUsage;
  }
  signal(SIGALRM, OnAlarm);
  alarm(static_cast<unsigned>((config->total_timeout.count() + 999) / 1000));

  const std::string state_path = fmt::format("{}/{}.state", config->state_dir, args.node);
  auto state = LoadState(state_path);
  if (!state.ok()) {
    log.Error("{}", state.status().message());
    return kUsage;
  }

  std::unique_ptr<slurm::Slurm> slurm;
  std::optional<slurm::Node> node;
  if (!args.diagnose || !config->gpu_count) {
    slurm = slurm::NewLibslurm();
    auto got = slurm->LoadNode(args.node);
    if (!got.ok()) {
      // Fail closed: without Slurm's view we can neither drain safely nor resume.
      log.Error("cannot read node {} from Slurm: {}; changing nothing", args.node,
                got.status().message());
      if (!args.diagnose)
        return kSlurmUnreadable;
    } else {
      node = *got;
    }
  }
  std::optional<unsigned> expected = config->gpu_count;
  if (!expected && node)
    expected = GpusFromGres(node->gres);

  Report report = RunChecks(*config, expected, *state);
  if (args.diagnose) {
    PrintDiagnosis(report, args.node);
    return report.findings.empty() ? kHealthy : kUnhealthy;
  }
  return ApplyVerdict(args.node, *config, report, *state, state_path, *slurm, log);
}
