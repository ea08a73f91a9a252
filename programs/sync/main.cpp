// k8sbridge-sync: keeps Slurm and Kubernetes in step in both directions
// (docs/sync.md). This file is the daemon's shell: flags, configuration, the
// Prometheus endpoint (its metrics are in metrics.h), and the wiring; the loop, its fail-closed
// gate and leader election are sync::Daemon's (sync/loop.h), the decisions sync::Reconciler's and
// the writes sync::Executor's (libk8sbridge).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/leader.h"
#include "k8sbridge/kube/program_client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/program.h"
#include "k8sbridge/slurm/libslurm.h"
#include "k8sbridge/slurm/libslurm_hostlists.h"
#include "k8sbridge/sync/loop.h"
#include "k8sbridge/sync/reconcile.h"
#include "metrics.h"

namespace k8sbridge::sync {
namespace {

constexpr int kExitUsage = 2;
std::atomic<bool> g_stop{false};

void OnSignal(int) {
  g_stop.store(true);
}

std::string DefaultIdentity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}-{}", host, getpid());
}

constexpr std::string_view kUsage =
    "usage: k8sbridge-sync [--config FILE] [--identity NAME] [--once [--no-lease]] [--debug]\n"
    "       k8sbridge-sync --help | --version\n"
    "  --config FILE   k8sbridge.conf (default $K8SBRIDGE_CONF or /etc/slurm/k8sbridge.conf)\n"
    "  --identity NAME this daemon's name in the Lease (default host-pid)\n"
    "  --once          one reconcile pass from fresh lists, holding the Lease for it (refused "
    "while another daemon holds it), then exit\n"
    "  --no-lease      with --once: act without the Lease, beside a running daemon\n"
    "  --debug         log skipped repeats and every pass\n";

void Usage(Logger& log) {
  log.Error("{}", kUsage.substr(0, kUsage.size() - 1));
}

struct Flags {
  std::string config_path, identity;
  bool once = false, debug = false, no_lease = false;
};

// The flags, or the exit code when they are wrong (the usage is logged).
std::optional<int> ParseFlags(int argc, char** argv, Flags& flags) {
  StderrLogger early("k8sbridge-sync");
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--config" || a == "--identity") && i + 1 < argc) {
      (a == "--config" ? flags.config_path : flags.identity) = argv[++i];
    } else if (a == "--once") {
      flags.once = true;
    } else if (a == "--no-lease") {
      flags.no_lease = true;
    } else if (a == "--debug") {
      flags.debug = true;
    } else {
      Usage(early);
      return kExitUsage;
    }
  }
  if (flags.no_lease && !flags.once) {
    early.Error("--no-lease goes with --once only: the daemon always holds the Lease to act");
    return kExitUsage;
  }
  if (flags.identity.empty())
    flags.identity = DefaultIdentity();
  if (flags.config_path.empty())
    flags.config_path = conf::DefaultConfigPath();
  return std::nullopt;
}

// The Prometheus endpoint and what it serves. The exposer holds its collectables
// weakly, so the endpoint owns them; the exposer goes first.
struct MetricsEndpoint {
  std::shared_ptr<prometheus::Registry> registry;
  std::shared_ptr<PowerMetrics> power;  // null without PowerMetricsFile=
  std::unique_ptr<prometheus::Exposer> exposer;
};

// The Prometheus endpoint of SyncMetricsListen, if set, with k8sbridge-power's
// counts when PowerMetricsFile= is; an address that cannot be listened on is a
// configuration error. The library throws: this runs once, at start.
Result<MetricsEndpoint> ServeMetrics(const conf::BridgeConfig& config,
                                     std::shared_ptr<prometheus::Registry> registry) {
  MetricsEndpoint endpoint{std::move(registry), nullptr, nullptr};
  if (config.sync.metrics_listen.empty())
    return endpoint;
  try {
    endpoint.exposer = std::make_unique<prometheus::Exposer>(config.sync.metrics_listen);
    endpoint.exposer->RegisterCollectable(endpoint.registry);
    if (!config.power.metrics_file.empty()) {
      endpoint.power = std::make_shared<PowerMetrics>(config.power.metrics_file);
      endpoint.exposer->RegisterCollectable(endpoint.power);
    }
    return endpoint;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format(
        "{}: SyncMetricsListen={}: cannot listen ({}): pick a free address or leave it empty",
        config.file, config.sync.metrics_listen, e.what()));
  }
}

// The daemon: informers, leader election and the loop, until SIGTERM or SIGINT.
int RunDaemon(const conf::BridgeConfig& config, const std::string& identity, kube::Client& client,
              slurm::Slurm& slurm, SyncMetrics& metrics, Logger& log,
              const power::PowerSetup* power) {
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  // Informers, the Slurm poller and a new lead wake the loop, so a change is acted
  // on at once.
  Wakeup wakeup;
  InformerCaches caches(client, config, &metrics, metrics.api(), [&] { wakeup.Wake(); });
  caches.Start();
  Election election(client, config, identity, log, metrics, [&] { wakeup.Wake(); });
  kube::EventRecorderOptions eo;
  eo.reporting_controller = contract::kSyncController;
  eo.reporting_instance = identity;
  kube::EventRecorder events(client, eo);
  Daemon daemon(config,
                {client, &events, slurm, caches, [&] { return election.IsLeader(); },
                 election.renew_deadline(), metrics, log, wakeup},
                power);
  log.Info("started as {}: cluster {}, namespace {}, Lease {}, poll {} ms, metrics {}", identity,
           config.cluster_name, config.kube.namespace_, election.lease_name(),
           config.sync.poll_interval.count(),
           config.sync.metrics_listen.empty() ? "off" : config.sync.metrics_listen);
  daemon.Run(g_stop);
  election.Stop();  // releases the lease: the other daemon takes over at once
  caches.Stop();
  events.Flush(std::chrono::seconds(2));
  return 0;
}

int Run(int argc, char** argv) {
  if (auto answered = AnswerHelpOrVersion(argc, argv, "k8sbridge-sync", kUsage))
    return *answered;
  Flags flags;
  if (auto wrong = ParseFlags(argc, argv, flags))
    return *wrong;
  StderrLogger log("k8sbridge-sync", flags.debug ? LogLevel::kDebug : LogLevel::kInfo);
  slurm::SlurmHostlists hostlists;
  auto loaded = conf::LoadBridgeConfig(flags.config_path, hostlists);
  if (!loaded.ok()) {
    log.Error("{}", loaded.status().message());
    return kExitUsage;
  }
  const conf::BridgeConfig config = std::move(*loaded);
  // The pod templates: a rollout compares each pod with its group's, and a reboot's
  // new pod is made from them. Without them the daemon still does everything else
  // (a second controller host may lack the files): rollouts are off, and it says so.
  std::optional<power::PowerSetup> setup;
  if (!config.node_groups.empty()) {
    auto loaded_setup = power::LoadPowerSetup(config);
    if (loaded_setup.ok())
      setup = std::move(*loaded_setup);
    else
      log.Warning("rollouts are off until a restart: {}", loaded_setup.status().message());
  }
  const power::PowerSetup* power = setup ? &*setup : nullptr;
  auto registry = std::make_shared<prometheus::Registry>();
  SyncMetrics metrics(*registry);
  kube::ClientOptions options = kube::ProgramClientOptions(config.kube, log);
  options.metrics = &metrics;
  options.max_retries = 2;  // the loop retries everything anyway
  auto client = kube::MakeClient(config.kube, config.file, options);
  if (!client.ok()) {
    log.Error("{}", client.status().message());
    return kExitUsage;
  }
  std::unique_ptr<slurm::Slurm> slurm = slurm::NewLibslurm();
  if (flags.once) {
    kube::LeaderElector once_elector(**client, LeaderOptions(config, flags.identity));
    return RunOnce(config, **client, *slurm, log, flags.no_lease ? nullptr : &once_elector, power);
  }
  auto endpoint = ServeMetrics(config, registry);
  if (!endpoint.ok()) {
    log.Error("{}", endpoint.status().message());
    return kExitUsage;
  }
  return RunDaemon(config, flags.identity, **client, *slurm, metrics, log, power);
}

}  // namespace
}  // namespace k8sbridge::sync

int main(int argc, char** argv) {
  return k8sbridge::sync::Run(argc, argv);
}
