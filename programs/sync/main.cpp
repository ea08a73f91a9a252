// k8sbridge-sync: keeps Slurm and Kubernetes in step in both directions
// (docs/sync.md). This file is the daemon's shell: flags, configuration, the
// Prometheus metrics and endpoint, and the wiring; the loop, its fail-closed gate
// and leader election are sync::Daemon's (sync/loop.h), the decisions
// sync::Reconciler's and the writes sync::Executor's (libk8sbridge).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
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

namespace k8sbridge::sync {
namespace {

constexpr int kExitUsage = 2;
std::atomic<bool> g_stop{false};

void OnSignal(int) {
  g_stop.store(true);
}

// The Prometheus metrics of docs/sync.md; as the client's kube::Metrics it also
// follows whether the API server answers (the gate reads that).
class SyncMetrics final : public kube::Metrics, public DaemonMetrics {
 public:
  explicit SyncMetrics(prometheus::Registry& r)
      : nodes_(prometheus::BuildGauge()
                   .Name("k8sbridge_sync_slurm_nodes")
                   .Help("Slurm nodes by state (base state and DRAIN/POWER flags)")
                   .Register(r)),
        pods_(prometheus::BuildGauge()
                  .Name("k8sbridge_sync_pods")
                  .Help("Worker pods of this cluster by phase (Terminating when being deleted)")
                  .Register(r)),
        actions_(prometheus::BuildCounter()
                     .Name("k8sbridge_sync_actions_total")
                     .Help("Actions taken, by kind and result")
                     .Register(r)),
        reconcile_(
            prometheus::BuildHistogram()
                .Name("k8sbridge_sync_reconcile_seconds")
                .Help("Time of one reconcile pass (plan and actions)")
                .Register(r)
                .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1,
                                                                 0.25, 0.5, 1, 2.5, 5, 10})),
        api_errors_(prometheus::BuildCounter()
                        .Name("k8sbridge_sync_api_errors_total")
                        .Help("Failed calls to Kubernetes or Slurm")
                        .Register(r)),
        resume_(prometheus::BuildHistogram()
                    .Name("k8sbridge_sync_resume_registration_seconds")
                    .Help("From POWERING_UP seen to the node registered (up)")
                    .Register(r)
                    .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 5, 10, 20, 30, 60, 120,
                                                                     300, 600})),
        leader_(prometheus::BuildGauge()
                    .Name("k8sbridge_sync_leader")
                    .Help("1 while this daemon holds the lease and acts")
                    .Register(r)
                    .Add({})),
        fresh_(prometheus::BuildGauge()
                   .Name("k8sbridge_sync_source_fresh")
                   .Help("1 while the side could be read; nothing is done while either is 0")
                   .Register(r)),
        skipped_(prometheus::BuildCounter()
                     .Name("k8sbridge_sync_reconciles_skipped_total")
                     .Help("Reconcile passes skipped, by reason")
                     .Register(r)),
        breaker_(prometheus::BuildGauge()
                     .Name("k8sbridge_sync_circuit_breaker_open")
                     .Help("1 while the node group's circuit breaker keeps its nodes drained")
                     .Register(r)) {}

  void RequestDone(std::string_view verb, int code, Clock::Steady::duration) override {
    if (ApiAnswering::Failed(code))
      ApiError("kubernetes");
    api_.RequestDone(verb, code);
  }
  const ApiAnswering& api() const { return api_; }
  void WatchRestarted(std::string_view, std::string_view reason) override {
    if (reason == "error")
      ApiError("kubernetes");
  }
  void ApiError(const std::string& side) { api_errors_.Add({{"side", side}}).Increment(); }
  void SlurmLoadFailed() override { ApiError("slurm"); }
  // result: "ok", "error", or "not_due" (a live re-read showed it was no longer due).
  void Action(ActionKind kind, std::string_view result) override {
    actions_.Add({{"kind", std::string(ActionKindName(kind))}, {"result", std::string(result)}})
        .Increment();
  }
  void Reconciled(Clock::Steady::duration d) override {
    reconcile_.Observe(std::chrono::duration<double>(d).count());
  }
  void Resumed(Clock::Steady::duration d) override {
    resume_.Observe(std::chrono::duration<double>(d).count());
  }
  void Leader(bool on) override { leader_.Set(on ? 1 : 0); }
  void Fresh(std::string_view side, bool on) override {
    fresh_.Add({{"side", std::string(side)}}).Set(on ? 1 : 0);
  }
  void Skipped(std::string_view reason) override {
    skipped_.Add({{"reason", std::string(reason)}}).Increment();
  }
  void Breaker(const std::string& group, bool open) override {
    breaker_.Add({{"group", group}}).Set(open ? 1 : 0);
  }
  // Counts by label value; values seen before and absent now go to 0.
  static void SetCounts(prometheus::Family<prometheus::Gauge>& family, const std::string& label,
                        std::map<std::string, prometheus::Gauge*>& seen,
                        const std::map<std::string, int>& counts) {
    for (auto& [k, g] : seen)
      g->Set(0);
    for (const auto& [k, n] : counts) {
      auto it = seen.find(k);
      if (it == seen.end())
        it = seen.emplace(k, &family.Add({{label, k}})).first;
      it->second->Set(n);
    }
  }
  void Census(const World& w) override {
    std::map<std::string, int> states, phases;
    for (const SlurmNode& n : w.slurm) {
      std::string s(n.BaseName());
      if (n.drain)
        s += "+DRAIN";
      if (n.powered_down)
        s += "+POWERED_DOWN";
      if (n.powering_up)
        s += "+POWERING_UP";
      if (n.powering_down)
        s += "+POWERING_DOWN";
      ++states[s];
    }
    for (const kube::Object& p : w.pods) {
      std::string phase = p.IsBeingDeleted() ? "Terminating" : kube::pod::Phase(p);
      ++phases[phase.empty() ? "Unknown" : phase];
    }
    SetCounts(nodes_, "state", seen_states_, states);
    SetCounts(pods_, "phase", seen_phases_, phases);
  }

 private:
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Family<prometheus::Gauge>& pods_;
  prometheus::Family<prometheus::Counter>& actions_;
  prometheus::Histogram& reconcile_;
  prometheus::Family<prometheus::Counter>& api_errors_;
  prometheus::Histogram& resume_;
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Gauge>& fresh_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Gauge>& breaker_;
  std::map<std::string, prometheus::Gauge*> seen_states_, seen_phases_;
  ApiAnswering api_;
};

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

// The Prometheus endpoint of SyncMetricsListen, if set; an address that cannot be
// listened on is a configuration error. The library throws: this runs once, at start.
Result<std::unique_ptr<prometheus::Exposer>> ServeMetrics(
    const conf::BridgeConfig& config, std::shared_ptr<prometheus::Registry> registry) {
  if (config.sync.metrics_listen.empty())
    return std::unique_ptr<prometheus::Exposer>();
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(config.sync.metrics_listen);
    exposer->RegisterCollectable(registry);
    return exposer;
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
  auto exposer = ServeMetrics(config, registry);
  if (!exposer.ok()) {
    log.Error("{}", exposer.status().message());
    return kExitUsage;
  }
  return RunDaemon(config, flags.identity, **client, *slurm, metrics, log, power);
}

}  // namespace
}  // namespace k8sbridge::sync

int main(int argc, char** argv) {
  return k8sbridge::sync::Run(argc, argv);
}
