// k8sbridge-sync: keeps Slurm and Kubernetes in step in both directions
// (docs/sync.md). This file is the daemon's shell: configuration, informers,
// leader election, the Prometheus endpoint and the loop; the decisions are
// sync::Reconciler's and the writes sync::Executor's (libk8sbridge).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/config.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/kube/leader.h"
#include "k8sbridge/log.h"
#include "k8sbridge/slurm/libslurm_hostlists.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/program.h"
#include "k8sbridge/sync/executor.h"
#include "k8sbridge/sync/reconcile.h"
#include "slurm_control.h"

namespace k8sbridge::sync {
namespace {

constexpr int kExitUsage = 2;
std::atomic<bool> g_stop{false};

void OnSignal(int) {
  g_stop.store(true);
}

// The Prometheus metrics of docs/sync.md.
class SyncMetrics final : public kube::Metrics {
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
    const int64_t now = Clock::Steady::now().time_since_epoch().count();
    if (code == 0 || code == 429 || code >= 500) {
      ApiError("kubernetes");
      if (verb != "WATCH")
        last_fail_.store(now);
    } else if (verb != "WATCH") {
      last_ok_.store(now);
    }
  }
  // The API server answered the latest request (the lease is read or renewed every
  // few seconds, so this follows the server within that). A stalled watch looks
  // healthy to its informer; this does not.
  bool KubeAnswering() const { return last_fail_.load() <= last_ok_.load(); }
  void WatchRestarted(std::string_view, std::string_view reason) override {
    if (reason == "error")
      ApiError("kubernetes");
  }
  void ApiError(const std::string& side) { api_errors_.Add({{"side", side}}).Increment(); }
  // result: "ok", "error", or "not_due" (a live re-read showed it was no longer due).
  void Action(ActionKind kind, std::string_view result) {
    actions_.Add({{"kind", std::string(ActionKindName(kind))}, {"result", std::string(result)}})
        .Increment();
  }
  void Reconciled(Clock::Steady::duration d) {
    reconcile_.Observe(std::chrono::duration<double>(d).count());
  }
  void Resumed(Clock::Steady::duration d) {
    resume_.Observe(std::chrono::duration<double>(d).count());
  }
  void Leader(bool on) { leader_.Set(on ? 1 : 0); }
  void Fresh(const std::string& side, bool on) { fresh_.Add({{"side", side}}).Set(on ? 1 : 0); }
  void Skipped(const std::string& reason) { skipped_.Add({{"reason", reason}}).Increment(); }
  void Breaker(const std::string& group, bool open) {
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
  void Census(const World& w) {
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
  std::atomic<int64_t> last_ok_{0}, last_fail_{0};
};

Result<kube::Config> KubeConfigFor(const conf::BridgeConfig& c) {
  Result<kube::Config> config = Status::Internal("unset");
  if (c.kube.in_cluster || (c.kube.kubeconfig.empty() && std::getenv("KUBERNETES_SERVICE_HOST"))) {
    config = kube::InClusterConfigFromEnv();
  } else if (!c.kube.kubeconfig.empty()) {
    config = kube::LoadKubeconfig({c.kube.kubeconfig}, c.kube.context, c.kube.allow_insecure_http);
  } else {
    config = kube::LoadKubeconfig({}, c.kube.context, c.kube.allow_insecure_http);
  }
  if (!config.ok())
    return config.status().WithContext(fmt::format("{}: Kubernetes connection", c.file));
  return config;
}

std::string DefaultIdentity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}-{}", host, getpid());
}

std::string LeaseName(const conf::BridgeConfig& c) {
  if (!c.sync.lease_name.empty())
    return c.sync.lease_name;
  std::string name = "k8sbridge-sync-";
  for (char ch : c.cluster_name)
    name += (ch == '_' || ch == '.') ? '-' : static_cast<char>(std::tolower(ch));
  return name;
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

kube::LeaderElectionOptions LeaderOptions(const conf::BridgeConfig& config,
                                          const std::string& identity) {
  kube::LeaderElectionOptions lo;
  lo.namespace_ = config.kube.namespace_;
  lo.name = LeaseName(config);
  lo.identity = identity;
  lo.lease_duration = std::chrono::duration_cast<std::chrono::seconds>(config.sync.lease_duration);
  lo.renew_deadline =
      std::max<std::chrono::seconds>(lo.lease_duration * 2 / 3, std::chrono::seconds(2));
  lo.retry_period = std::max<std::chrono::seconds>(lo.lease_duration / 7, std::chrono::seconds(1));
  return lo;
}

int OnePass(const conf::BridgeConfig& config, kube::Client& client, SlurmControl& slurm,
            Logger& log, kube::LeaderElector* elector) {
  World world;
  auto nodes = slurm.LoadNodes();
  if (!nodes.ok()) {
    log.Error("Slurm cannot be read, nothing done: {}", nodes.status().ToString());
    return 1;
  }
  world.slurm = std::move(*nodes);
  kube::ListOptions lo;
  lo.label_selector = power::OwnedPodsSelector(config.cluster_name);
  auto pods = client.List(kube::kPods, config.kube.namespace_, lo);
  auto knodes = client.List(kube::kNodes, "", {});
  if (!pods.ok() || !knodes.ok()) {
    log.Error("Kubernetes cannot be read, nothing done: {}",
              (!pods.ok() ? pods.status() : knodes.status()).ToString());
    return 1;
  }
  world.pods = std::move(pods->items);
  world.nodes = std::move(knodes->items);
  Reconciler reconciler(ReconcileOptions::From(config));
  auto actions = reconciler.Plan(world, client.clock().Now(), client.clock().WallNow());
  ExecutorOptions eo{config.cluster_name, config.kube.namespace_};
  if (elector) {
    // The Lease is not renewed during the pass: it acts within the renew deadline.
    const auto until = client.clock().Now() + LeaderOptions(config, "").renew_deadline;
    eo.leading = [elector, until, &client]() {
      return elector->IsLeader() && client.clock().Now() < until;
    };
  }
  Executor exec(client, slurm, nullptr, log, eo);
  PassResult r = exec.ExecutePass(
      actions, MaxDestructive(config.sync.max_actions_per_pass, world.slurm.size()));
  if (!r.skipped.empty())
    log.Warning("{}", r.why);
  log.Info("one pass: {} action(s), {} failed", actions.size(), r.failed);
  return r.failed || !r.skipped.empty() ? 1 : 0;
}

// --once: the pass holds the Lease like the daemon does (so it never acts beside
// the leader), unless --no-lease says to. The Lease is released at the end.
int RunOnce(const conf::BridgeConfig& config, kube::Client& client, SlurmControl& slurm,
            Logger& log, kube::LeaderElector* elector) {
  if (elector && !elector->TryAcquireOrRenew()) {
    log.Error(
        "--once: the Lease {}/{} is held by {} (or cannot be read): nothing done; stop that "
        "daemon, or give --no-lease to act beside it",
        config.kube.namespace_, LeaseName(config),
        elector->ObservedLeader().empty() ? "?" : elector->ObservedLeader());
    return 1;
  }
  const int rc = OnePass(config, client, slurm, log, elector);
  if (elector)
    elector->Release();
  return rc;
}

int Run(int argc, char** argv) {
  if (auto answered = AnswerHelpOrVersion(argc, argv, "k8sbridge-sync", kUsage))
    return *answered;
  StderrLogger early("k8sbridge-sync");
  std::string config_path, identity;
  bool once = false, debug = false, no_lease = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--config" || a == "--identity") && i + 1 < argc) {
      (a == "--config" ? config_path : identity) = argv[++i];
    } else if (a == "--once") {
      once = true;
    } else if (a == "--no-lease") {
      no_lease = true;
    } else if (a == "--debug") {
      debug = true;
    } else {
      Usage(early);
      return kExitUsage;
    }
  }
  if (no_lease && !once) {
    early.Error("--no-lease goes with --once only: the daemon always holds the Lease to act");
    return kExitUsage;
  }
  StderrLogger log("k8sbridge-sync", debug ? LogLevel::kDebug : LogLevel::kInfo);
  if (config_path.empty())
    config_path = conf::DefaultConfigPath();
  slurm::SlurmHostlists hostlists;
  auto loaded = conf::LoadBridgeConfig(config_path, hostlists);
  if (!loaded.ok()) {
    log.Error("{}", loaded.status().message());
    return kExitUsage;
  }
  const conf::BridgeConfig config = std::move(*loaded);
  if (identity.empty())
    identity = DefaultIdentity();
  auto kube_config = KubeConfigFor(config);
  if (!kube_config.ok()) {
    log.Error("{}", kube_config.status().message());
    return kExitUsage;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  SyncMetrics metrics(*registry);
  kube::ClientOptions options;
  options.logger = &log;
  options.metrics = &metrics;
  options.qps = config.kube.qps;
  options.burst = config.kube.burst;
  options.connect_timeout = config.kube.connect_timeout;
  options.request_timeout = config.kube.request_timeout;
  options.max_retries = 2;  // the loop retries everything anyway
  auto client_or = kube::Client::Create(*kube_config, options);
  if (!client_or.ok()) {
    log.Error("{}", client_or.status().message());
    return kExitUsage;
  }
  kube::Client& client = **client_or;
  LibslurmControl slurm;
  if (once) {
    kube::LeaderElector once_elector(client, LeaderOptions(config, identity));
    return RunOnce(config, client, slurm, log, no_lease ? nullptr : &once_elector);
  }

  std::unique_ptr<prometheus::Exposer> exposer;
  if (!config.sync.metrics_listen.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(config.sync.metrics_listen);
      exposer->RegisterCollectable(registry);
    } catch (const std::exception& e) {
      log.Error(
          "{}: SyncMetricsListen={}: cannot listen ({}): pick a free address or leave it "
          "empty",
          config.file, config.sync.metrics_listen, e.what());
      return kExitUsage;
    }
  }

  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);

  // Informers wake the loop, so a Kubernetes change is acted on at once.
  std::mutex wake_mu;
  std::condition_variable wake_cv;
  bool woken = false;
  auto wake = [&]() {
    {
      std::lock_guard lock(wake_mu);
      woken = true;
    }
    wake_cv.notify_one();
  };
  kube::EventHandlers handlers{[&](const kube::Object&) { wake(); },
                               [&](const kube::Object&, const kube::Object&) { wake(); },
                               [&](const kube::Object&) { wake(); }};
  kube::ReflectorOptions pod_options;
  pod_options.namespace_ = config.kube.namespace_;
  pod_options.label_selector = power::OwnedPodsSelector(config.cluster_name);
  // A silent stream (a stalled server) is noticed within a minute and a half.
  pod_options.watch_timeout_seconds = 60;
  kube::ReflectorOptions node_options = pod_options;
  node_options.namespace_.clear();
  node_options.label_selector.clear();
  kube::Informer pods(client, kube::kPods, pod_options, &metrics);
  kube::Informer nodes(client, kube::kNodes, node_options, &metrics);
  pods.AddHandlers(handlers);
  nodes.AddHandlers(handlers);
  pods.Start();
  nodes.Start();

  kube::LeaderElectionOptions lo = LeaderOptions(config, identity);
  lo.on_started_leading = [&]() {
    log.Info("leading: holding Lease {}/{} as {}", lo.namespace_, lo.name, identity);
    metrics.Leader(true);
    wake();
  };
  lo.on_stopped_leading = [&]() {
    log.Warning("no longer leading (Lease {}/{} not renewed): acting stops", lo.namespace_,
                lo.name);
    metrics.Leader(false);
  };
  lo.on_new_leader = [&](const std::string& leader) {
    if (leader != identity)
      log.Info("leader is {}", leader);
  };
  kube::LeaderElector elector(client, lo);
  kube::CancelToken elector_cancel;
  std::thread elector_thread([&]() {
    while (!elector_cancel.cancelled())
      elector.Run(elector_cancel);
  });

  kube::EventRecorderOptions eo;
  eo.reporting_controller = contract::kSyncController;
  eo.reporting_instance = identity;
  eo.default_namespace = config.kube.namespace_;
  kube::EventRecorder events(client, eo);
  // Leadership is asked before every action; a pass that has run longer than the
  // renew deadline stops too: its plan is that old, and the lease may have changed
  // hands since (IsLeader turns false only some time after a renewal failed).
  std::atomic<int64_t> pass_started{0};
  ExecutorOptions xo{config.cluster_name, config.kube.namespace_};
  xo.leading = [&]() {
    const auto age = client.clock().Now().time_since_epoch().count() - pass_started.load();
    return elector.IsLeader() && Clock::Steady::duration(age) < lo.renew_deadline;
  };
  Executor exec(client, slurm, &events, log, xo);
  Reconciler reconciler(ReconcileOptions::From(config));

  log.Info("started as {}: cluster {}, namespace {}, Lease {}, poll {} ms, metrics {}", identity,
           config.cluster_name, config.kube.namespace_, lo.name, config.sync.poll_interval.count(),
           config.sync.metrics_listen.empty() ? "off" : config.sync.metrics_listen);
  // Slurm is polled on its own thread, so that a slow answer (slurmctld busy) never
  // holds up acting on a Kubernetes change; the loop acts on the latest answer while
  // it is recent enough.
  struct Snapshot {
    Status status = Status::Unavailable("slurm_load_node has not answered yet");
    std::vector<SlurmNode> nodes;
    Clock::Steady::time_point when{};
  };
  std::mutex snapshot_mu;
  Snapshot snapshot;
  const Clock::Steady::duration slurm_max_age =
      std::max<Clock::Steady::duration>(std::chrono::seconds(10), 4 * config.sync.poll_interval);
  std::thread slurm_thread([&]() {
    while (!g_stop.load()) {
      const auto t0 = client.clock().Now();
      auto loaded = slurm.LoadNodes();
      const auto took = client.clock().Now() - t0;
      if (took > std::chrono::seconds(2)) {
        log.Warning("slurm_load_node took {} ms",
                    std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
      }
      if (!loaded.ok())
        metrics.ApiError("slurm");
      bool changed = false;
      {
        std::lock_guard lock(snapshot_mu);
        if (loaded.ok()) {
          changed = !snapshot.status.ok() || *loaded != snapshot.nodes;
          snapshot.nodes = std::move(*loaded);
          snapshot.status = Status::Ok();
          snapshot.when = client.clock().Now();
        } else {
          changed = snapshot.status.ok();
          snapshot.status = loaded.status();
        }
      }
      if (changed)
        wake();
      for (auto left = config.sync.poll_interval; left.count() > 0 && !g_stop.load();
           left -= std::chrono::milliseconds(50))
        std::this_thread::sleep_for(
            std::min<std::chrono::milliseconds>(left, std::chrono::milliseconds(50)));
    }
  });

  std::string last_skip;   // logged once per change
  std::string last_guard;  // the mass-action guard's or a lost lead's, likewise
  while (!g_stop.load()) {
    {
      std::unique_lock lock(wake_mu);
      wake_cv.wait_for(lock, config.sync.poll_interval, [&] { return woken || g_stop.load(); });
      woken = false;
    }
    if (g_stop.load())
      break;
    const auto started = client.clock().Now();
    World world;
    Snapshot snap;
    {
      std::lock_guard lock(snapshot_mu);
      snap = snapshot;
    }
    const bool slurm_ok = snap.status.ok() && started - snap.when <= slurm_max_age;
    if (slurm_ok)
      world.slurm = std::move(snap.nodes);
    const bool kube_ok = pods.IsHealthy() && nodes.IsHealthy() && metrics.KubeAnswering();
    metrics.Fresh("slurm", slurm_ok);
    metrics.Fresh("kubernetes", kube_ok);
    const bool leader = elector.IsLeader();
    metrics.Leader(leader);
    std::string skip;
    if (!slurm_ok)
      skip = fmt::format(
          "slurm_unreadable|Slurm cannot be read ({})",
          !snap.status.ok()
              ? snap.status.ToString()
              : fmt::format(
                    "no answer to slurm_load_node for {} s",
                    std::chrono::duration_cast<std::chrono::seconds>(started - snap.when).count()));
    else if (!kube_ok)
      skip = fmt::format(
          "kubernetes_unreadable|Kubernetes cannot be read (pods cache {}, nodes cache {}, API "
          "server {})",
          pods.IsHealthy() ? "live" : "not synced or failing",
          nodes.IsHealthy() ? "live" : "not synced or failing",
          metrics.KubeAnswering() ? "answering" : "failing");
    else if (!leader)
      skip = "not_leader|not the leader: watching only";
    world.pods = pods.List();
    world.nodes = nodes.List();
    if (slurm_ok)
      metrics.Census(world);
    if (!skip.empty()) {
      const std::string reason = skip.substr(0, skip.find('|'));
      metrics.Skipped(reason);
      if (skip != last_skip) {
        if (reason == "not_leader")
          log.Info("{}", skip.substr(skip.find('|') + 1));
        else
          log.Warning("{}: nothing destructive is done until it can",
                      skip.substr(skip.find('|') + 1));
      }
      last_skip = skip;
      // Graces start afresh once both sides are back, instead of firing at once.
      reconciler.ResetTimers();
      continue;
    }
    if (!last_skip.empty()) {
      log.Info("both sides readable and leading: reconciling");
      last_skip.clear();
    }
    const auto wall = client.clock().WallNow();
    auto actions = reconciler.Plan(world, started, wall);
    pass_started.store(started.time_since_epoch().count());
    PassResult done = exec.ExecutePass(
        actions, MaxDestructive(config.sync.max_actions_per_pass, world.slurm.size()),
        [&](const Action& a, std::string_view result) { metrics.Action(a.kind, result); });
    if (!done.skipped.empty()) {
      metrics.Skipped(done.skipped);
      if (done.skipped != last_guard)
        log.Warning("{}", done.why);
    }
    last_guard = done.skipped;
    for (auto d : reconciler.TakeResumeLatencies())
      metrics.Resumed(d);
    auto open = reconciler.OpenBreakers(wall);
    if (config.sync.breaker_threshold > 0) {
      for (const auto& group : config.node_groups)
        metrics.Breaker(group.name, open.count(group.name) != 0);
    }
    metrics.Reconciled(client.clock().Now() - started);
    log.Debug("pass: {} Slurm nodes, {} pods, {} Kubernetes nodes: {} action(s)",
              world.slurm.size(), world.pods.size(), world.nodes.size(), actions.size());
  }
  log.Info("stopping");
  slurm_thread.join();
  elector_cancel.Cancel();
  elector_thread.join();  // releases the lease: the other daemon takes over at once
  pods.Stop();
  nodes.Stop();
  events.Flush(std::chrono::seconds(2));
  return 0;
}

}  // namespace
}  // namespace k8sbridge::sync

int main(int argc, char** argv) {
  return k8sbridge::sync::Run(argc, argv);
}
