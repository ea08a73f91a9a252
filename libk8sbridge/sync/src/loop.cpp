#include "k8sbridge/sync/loop.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "k8sbridge/power/worker_pod.h"

namespace k8sbridge::sync {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Slurm's poller sleeps in steps this long, so that a stop is seen promptly.
constexpr milliseconds kStopCheck{50};
// A slower slurm_load_node is logged: slurmctld is struggling.
constexpr seconds kSlowSlurmLoad{2};

std::string SlurmUnreadable(const SlurmSnapshot& slurm, Clock::Steady::time_point now) {
  if (!slurm.status.ok())
    return fmt::format("Slurm cannot be read ({})", slurm.status.ToString());
  return fmt::format("Slurm cannot be read (no answer to slurm_load_node for {} s)",
                     duration_cast<seconds>(now - slurm.when).count());
}

std::string KubernetesUnreadable(const KubeHealth& kube) {
  return fmt::format("Kubernetes cannot be read (pods cache {}, nodes cache {}, API server {})",
                     kube.pods_live ? "live" : "not synced or failing",
                     kube.nodes_live ? "live" : "not synced or failing",
                     kube.api_answering ? "answering" : "failing");
}

bool SlurmFresh(const SlurmSnapshot& slurm, Clock::Steady::time_point now,
                Clock::Steady::duration max_age) {
  return slurm.status.ok() && now - slurm.when <= max_age;
}

}  // namespace

std::string_view GateReason(Gate gate) {
  switch (gate) {
    case Gate::kOpen:
      return "";
    case Gate::kSlurmUnreadable:
      return "slurm_unreadable";
    case Gate::kKubernetesUnreadable:
      return "kubernetes_unreadable";
    case Gate::kNotLeader:
      return "not_leader";
  }
  return "";
}

GateState EvaluateGate(const SlurmSnapshot& slurm, Clock::Steady::time_point now,
                       Clock::Steady::duration slurm_max_age, const KubeHealth& kube, bool leader) {
  if (!SlurmFresh(slurm, now, slurm_max_age))
    return {Gate::kSlurmUnreadable, SlurmUnreadable(slurm, now)};
  if (!kube.ok())
    return {Gate::kKubernetesUnreadable, KubernetesUnreadable(kube)};
  if (!leader)
    return {Gate::kNotLeader, "not the leader: watching only"};
  return {};
}

Clock::Steady::duration SlurmMaxAge(Clock::Steady::duration poll_interval) {
  return std::max<Clock::Steady::duration>(seconds(10), 4 * poll_interval);
}

void ApiAnswering::RequestDone(std::string_view verb, int code) {
  // A watch's end says nothing of whether the server answers requests now.
  if (verb == "WATCH")
    return;
  (Failed(code) ? last_fail_ : last_ok_).store(++seq_);
}

// ---- informers ---------------------------------------------------------------

namespace {

kube::ReflectorOptions PodInformerOptions(const conf::BridgeConfig& config) {
  kube::ReflectorOptions o;
  o.namespace_ = config.kube.namespace_;
  o.label_selector = power::OwnedPodsSelector(config.cluster_name);
  // A silent stream (a stalled server) is noticed within a minute and a half.
  o.watch_timeout_seconds = 60;
  return o;
}

kube::ReflectorOptions NodeInformerOptions(const conf::BridgeConfig& config) {
  kube::ReflectorOptions o = PodInformerOptions(config);
  o.namespace_.clear();
  o.label_selector.clear();
  return o;
}

}  // namespace

InformerCaches::InformerCaches(kube::Client& client, const conf::BridgeConfig& config,
                               kube::Metrics* metrics, const ApiAnswering& api,
                               std::function<void()> changed)
    : api_(api),
      pods_(client, kube::kPods, PodInformerOptions(config), metrics),
      nodes_(client, kube::kNodes, NodeInformerOptions(config), metrics) {
  kube::EventHandlers handlers{[changed](const kube::Object&) { changed(); },
                               [changed](const kube::Object&, const kube::Object&) { changed(); },
                               [changed](const kube::Object&) { changed(); }};
  pods_.AddHandlers(handlers);
  nodes_.AddHandlers(handlers);
}

void InformerCaches::Start() {
  pods_.Start();
  nodes_.Start();
}

void InformerCaches::Stop() {
  pods_.Stop();
  nodes_.Stop();
}

KubeHealth InformerCaches::Health() const {
  return {pods_.IsHealthy(), nodes_.IsHealthy(), api_.answering()};
}

// ---- leader election -----------------------------------------------------------

std::string LeaseName(const conf::BridgeConfig& c) {
  if (!c.sync.lease_name.empty())
    return c.sync.lease_name;
  std::string name = "k8sbridge-sync-";
  for (char ch : c.cluster_name)
    name += (ch == '_' || ch == '.') ? '-' : static_cast<char>(std::tolower(ch));
  return name;
}

kube::LeaderElectionOptions LeaderOptions(const conf::BridgeConfig& config,
                                          const std::string& identity) {
  kube::LeaderElectionOptions lo;
  lo.namespace_ = config.kube.namespace_;
  lo.name = LeaseName(config);
  lo.identity = identity;
  lo.lease_duration = duration_cast<seconds>(config.sync.lease_duration);
  lo.renew_deadline = std::max<seconds>(lo.lease_duration * 2 / 3, seconds(2));
  lo.retry_period = std::max<seconds>(lo.lease_duration / 7, seconds(1));
  return lo;
}

namespace {

kube::LeaderElectionOptions WithCallbacks(kube::LeaderElectionOptions lo, Logger& log,
                                          DaemonMetrics& metrics,
                                          std::function<void()> started_leading) {
  lo.on_started_leading = [&log, &metrics, started_leading, ns = lo.namespace_, name = lo.name,
                           identity = lo.identity]() {
    log.Info("leading: holding Lease {}/{} as {}", ns, name, identity);
    metrics.Leader(true);
    started_leading();
  };
  lo.on_stopped_leading = [&log, &metrics, ns = lo.namespace_, name = lo.name]() {
    log.Warning("no longer leading (Lease {}/{} not renewed): acting stops", ns, name);
    metrics.Leader(false);
  };
  lo.on_new_leader = [&log, identity = lo.identity](const std::string& leader) {
    if (leader != identity)
      log.Info("leader is {}", leader);
  };
  return lo;
}

}  // namespace

Election::Election(kube::Client& client, const conf::BridgeConfig& config,
                   const std::string& identity, Logger& log, DaemonMetrics& metrics,
                   std::function<void()> started_leading)
    : options_(LeaderOptions(config, identity)),
      elector_(client, WithCallbacks(options_, log, metrics, std::move(started_leading))),
      thread_([this]() {
        while (!cancel_.cancelled())
          elector_.Run(cancel_);
      }) {}

Election::~Election() {
  Stop();
}

void Election::Stop() {
  cancel_.Cancel();
  if (thread_.joinable())
    thread_.join();
}

// ---- the loop ------------------------------------------------------------------

Daemon::Daemon(const conf::BridgeConfig& config, DaemonParts parts, const power::PowerSetup* power)
    : config_(config),
      parts_(std::move(parts)),
      clock_(parts_.client.clock()),
      setup_(power ? std::make_unique<power::PowerSetup>(*power) : nullptr),
      reconciler_(ReconcileOptions::For(config, setup_.get(), parts_.slurm, parts_.log)),
      executor_(parts_.client, parts_.slurm, parts_.events, parts_.log,
                [this] {
                  ExecutorOptions xo{config_.cluster_name, config_.kube.namespace_};
                  xo.leading = [this]() { return LeadingThisPass(); };
                  xo.power = setup_.get();
                  return xo;
                }()),
      slurm_max_age_(SlurmMaxAge(config.sync.poll_interval)) {}

bool Daemon::LeadingThisPass() {
  const auto age = clock_.Now().time_since_epoch().count() - pass_started_.load();
  return parts_.is_leader() && Clock::Steady::duration(age) < parts_.renew_deadline;
}

void Wakeup::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

bool Wakeup::Wait(Clock::Steady::duration timeout, const std::atomic<bool>& stop, bool* woken) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return woken_ || stop.load(); });
  if (woken)
    *woken = woken_;
  woken_ = false;
  return !stop.load();
}

void Daemon::PollSlurm() {
  const auto t0 = clock_.Now();
  auto loaded = parts_.slurm.LoadChangedNodes();
  const auto took = clock_.Now() - t0;
  if (took > kSlowSlurmLoad)
    parts_.log.Warning("slurm_load_node took {} ms", duration_cast<milliseconds>(took).count());
  if (!loaded.ok())
    parts_.metrics.SlurmLoadFailed();
  bool changed = false;
  {
    std::lock_guard lock(snapshot_mu_);
    if (loaded.ok()) {
      // No change since the last answer (nullopt): the snapshot stays, only fresher.
      changed = !snapshot_.status.ok() || (loaded->has_value() && **loaded != snapshot_.nodes);
      if (loaded->has_value())
        snapshot_.nodes = std::move(**loaded);
      snapshot_.status = Status::Ok();
      snapshot_.when = clock_.Now();
    } else {
      changed = snapshot_.status.ok();
      snapshot_.status = loaded.status();
    }
  }
  if (changed)
    parts_.wakeup.Wake();
}

void Daemon::PollSlurmUntil(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    PollSlurm();
    for (auto left = config_.sync.poll_interval; left.count() > 0 && !stop.load();
         left -= kStopCheck)
      clock_.SleepFor(std::min<Clock::Steady::duration>(left, kStopCheck));
  }
}

void Daemon::ReportGate(const GateState& gate) {
  if (gate.open()) {
    if (!last_gate_.open())
      parts_.log.Info("both sides readable and leading: reconciling");
    last_gate_ = gate;
    return;
  }
  parts_.metrics.Skipped(GateReason(gate.gate));
  if (gate != last_gate_) {
    if (gate.gate == Gate::kNotLeader)
      parts_.log.Info("{}", gate.detail);
    else
      parts_.log.Warning("{}: nothing destructive is done until it can", gate.detail);
  }
  last_gate_ = gate;
}

GateState Daemon::CheckGate(Clock::Steady::time_point now, SlurmSnapshot& snap, bool with_nodes) {
  {
    std::lock_guard lock(snapshot_mu_);
    snap.status = snapshot_.status;
    snap.when = snapshot_.when;
    if (with_nodes)
      snap.nodes = snapshot_.nodes;
  }
  const KubeHealth kube = parts_.kube.Health();
  const bool leader = parts_.is_leader();
  parts_.metrics.Fresh("slurm", SlurmFresh(snap, now, slurm_max_age_));
  parts_.metrics.Fresh("kubernetes", kube.ok());
  parts_.metrics.Leader(leader);
  return EvaluateGate(snap, now, slurm_max_age_, kube, leader);
}

GateState Daemon::RunPass() {
  const auto started = clock_.Now();
  last_full_ = started;
  last_actions_ = 0;
  SlurmSnapshot snap;
  const GateState gate = CheckGate(started, snap, true);
  const bool slurm_ok = SlurmFresh(snap, started, slurm_max_age_);
  World world;
  if (slurm_ok)
    world.slurm = std::move(snap.nodes);
  world.pods = parts_.kube.Pods();
  world.nodes = parts_.kube.Nodes();
  if (slurm_ok)
    parts_.metrics.Census(world);
  ReportGate(gate);
  if (!gate.open()) {
    // Graces start afresh once both sides are back, instead of firing at once.
    reconciler_.ResetTimers();
    return gate;
  }
  Act(world, started);
  return gate;
}

GateState Daemon::Tick(bool changed) {
  const auto now = clock_.Now();
  const bool reloaded = RefreshTemplates();
  if (changed || reloaded || last_actions_ > 0 || now - last_full_ >= kQuietPassEvery ||
      reconciler_.Waiting())
    return RunPass();
  SlurmSnapshot snap;
  const GateState gate = CheckGate(now, snap, false);
  if (gate != last_gate_)
    return RunPass();
  ReportGate(gate);
  return gate;
}

bool Daemon::RefreshTemplates() {
  if (!setup_)
    return false;
  std::string stamp;
  for (const auto& [group, tmpl] : setup_->templates) {
    struct stat st {};
    stamp += stat(tmpl.file.c_str(), &st) == 0
                 ? fmt::format("{}:{}.{}:{};", tmpl.file, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                               st.st_size)
                 : tmpl.file + ":missing;";
  }
  if (stamp == templates_stamp_)
    return false;
  const bool first = templates_stamp_.empty();
  templates_stamp_ = stamp;  // a broken file is reported once per change, not every pass
  if (first)
    return false;  // the constructor's templates are these files
  auto loaded = power::LoadPowerSetup(config_);
  if (!loaded.ok()) {
    parts_.log.Error("pod templates not reloaded (rollouts keep the last good ones): {}",
                     loaded.status().message());
    return false;
  }
  for (const auto& [group, tmpl] : loaded->templates) {
    if (setup_->templates.at(group).hash != tmpl.hash)
      parts_.log.Info("node group {}: pod template {} changed (hash {}): its pods roll", group,
                      tmpl.file, tmpl.hash);
  }
  *setup_ = std::move(*loaded);
  reconciler_.SetTemplateHashes(ReconcileOptions::From(config_, setup_.get()).template_hashes);
  return true;
}

void Daemon::Act(const World& world, Clock::Steady::time_point started) {
  RefreshTemplates();
  const auto wall = clock_.WallNow();
  auto actions = reconciler_.Plan(world, started, wall);
  last_actions_ = actions.size();
  pass_started_.store(started.time_since_epoch().count());
  PassResult done = executor_.ExecutePass(
      actions, MaxDestructive(config_.sync.max_actions_per_pass, world.slurm.size()),
      [&](const Action& a, std::string_view result) { parts_.metrics.Action(a.kind, result); });
  if (!done.skipped.empty()) {
    parts_.metrics.Skipped(done.skipped);
    if (done.skipped != last_guard_)
      parts_.log.Warning("{}", done.why);
  }
  last_guard_ = done.skipped;
  for (auto d : reconciler_.TakeResumeLatencies())
    parts_.metrics.Resumed(d);
  auto open = reconciler_.OpenBreakers(wall);
  if (config_.sync.breaker_threshold > 0) {
    for (const auto& group : config_.node_groups)
      parts_.metrics.Breaker(group.name, open.count(group.name) != 0);
  }
  parts_.metrics.Reconciled(clock_.Now() - started);
  parts_.log.Debug("pass: {} Slurm nodes, {} pods, {} Kubernetes nodes: {} action(s)",
                   world.slurm.size(), world.pods.size(), world.nodes.size(), actions.size());
}

void Daemon::Run(const std::atomic<bool>& stop) {
  // Slurm is polled on its own thread, so that a slow answer (slurmctld busy)
  // never holds up acting on a Kubernetes change; passes act on the latest answer
  // while it is recent enough.
  std::thread slurm_thread([&]() { PollSlurmUntil(stop); });
  bool changed = true;
  while (parts_.wakeup.Wait(config_.sync.poll_interval, stop, &changed))
    Tick(changed);
  parts_.log.Info("stopping");
  slurm_thread.join();
}

// ---- --once --------------------------------------------------------------------

namespace {

int OnePass(const conf::BridgeConfig& config, kube::Client& client, slurm::Slurm& slurm,
            Logger& log, kube::LeaderElector* elector, const power::PowerSetup* setup) {
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
  Reconciler reconciler(ReconcileOptions::For(config, setup, slurm, log));
  auto actions = reconciler.Plan(world, client.clock().Now(), client.clock().WallNow());
  ExecutorOptions eo{config.cluster_name, config.kube.namespace_};
  eo.power = setup;
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

}  // namespace

int RunOnce(const conf::BridgeConfig& config, kube::Client& client, slurm::Slurm& slurm,
            Logger& log, kube::LeaderElector* elector, const power::PowerSetup* power) {
  // The pass holds the Lease like the daemon does (so it never acts beside the
  // leader), unless --no-lease says to.
  if (elector && !elector->TryAcquireOrRenew()) {
    log.Error(
        "--once: the Lease {}/{} is held by {} (or cannot be read): nothing done; stop that "
        "daemon, or give --no-lease to act beside it",
        config.kube.namespace_, LeaseName(config),
        elector->ObservedLeader().empty() ? "?" : elector->ObservedLeader());
    return 1;
  }
  const int rc = OnePass(config, client, slurm, log, elector, power);
  if (elector)
    elector->Release();
  return rc;
}

}  // namespace k8sbridge::sync
