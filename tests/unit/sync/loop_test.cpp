// The daemon's loop on a FakeClock: each fail-closed gate (Slurm unreadable or
// stale, Kubernetes unreadable, not leading, the lead lost mid-pass) and the
// mass-action cap, with passes driven one by one (Daemon::RunPass), never slept.
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/log.h"
#include "k8sbridge/sync/loop.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace conf = k8sbridge::conf;
namespace kube = k8sbridge::kube;
namespace ks = k8sbridge::sync;
using k8sbridge::Clock;
using k8sbridge::LogLevel;
using k8sbridge::Status;
using ks::Gate;
using kube::FakeTransport;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kConf = R"(
ClusterName=hpc1
Namespace=slurm
NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml
SyncPollInterval=500ms
SyncMaxActionsPerPass=1
)";

// What the loop reported, as "name:label=value" lines in order.
class RecordingMetrics final : public ks::DaemonMetrics {
 public:
  void SlurmLoadFailed() override { Add("slurm_load_failed"); }
  void Fresh(std::string_view side, bool fresh) override {
    Add(fmt::format("fresh:{}={}", side, fresh ? 1 : 0));
  }
  void Leader(bool leading) override { Add(fmt::format("leader={}", leading ? 1 : 0)); }
  void Skipped(std::string_view reason) override { Add(fmt::format("skipped:{}", reason)); }
  void Census(const ks::World&) override { Add("census"); }
  void Action(ks::ActionKind kind, std::string_view result) override {
    Add(fmt::format("action:{}={}", ks::ActionKindName(kind), result));
  }
  void Resumed(Clock::Steady::duration) override { Add("resumed"); }
  void Breaker(const std::string& group, bool open) override {
    Add(fmt::format("breaker:{}={}", group, open ? 1 : 0));
  }
  void Reconciled(Clock::Steady::duration) override { Add("reconciled"); }

  int Count(const std::string& line) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count(lines_.begin(), lines_.end(), line));
  }
  void Clear() {
    std::lock_guard lock(mu_);
    lines_.clear();
  }

 private:
  void Add(std::string line) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::move(line));
  }
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// The informers' caches as a test sets them; `on_read` runs when the pass reads
// the Kubernetes nodes (after it has taken its start time).
class SetCaches final : public ks::KubeCaches {
 public:
  ks::KubeHealth health{true, true, true};
  std::vector<kube::Object> pods, nodes;
  std::function<void()> on_read;
  ks::KubeHealth Health() const override { return health; }
  std::vector<kube::Object> Pods() const override { return pods; }
  std::vector<kube::Object> Nodes() const override {
    if (on_read)
      on_read();
    return nodes;
  }
};

kube::Object Parse(const std::string& json) {
  auto o = kube::Object::Parse(json);
  BOOST_REQUIRE_MESSAGE(o.ok(), o.status().ToString() + ": " + json);
  return *o;
}

// A Running worker pod of cluster hpc1 for Slurm node `name`, on Kubernetes node n-0.
kube::Object WorkerPod(const std::string& name) {
  return Parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
               R"(","namespace":"slurm","uid":"u-)" + name +
               R"(","resourceVersion":"1","labels":{"app.kubernetes.io/managed-by":"k8sbridge",)"
               R"("k8sbridge.io/cluster":"hpc1","k8sbridge.io/node":")" +
               name + R"("}},"spec":{"nodeName":"n-0"},"status":{"phase":"Running"}})");
}

kube::Object KubeNode(const std::string& ready) {
  return Parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0"},"spec":{},)"
               R"("status":{"conditions":[{"type":"Ready","status":")" +
               ready + R"(","reason":"KubeletNotReady","message":"gone"}]}})");
}

ks::SlurmNode Idle(const std::string& name, const std::string& drain_reason = "") {
  ks::SlurmNode n;
  n.name = name;
  n.base = ks::SlurmNode::Base::kIdle;
  n.cloud = true;
  n.drain = !drain_reason.empty();
  n.reason = drain_reason;
  return n;
}

struct Fixture {
  conf::BridgeConfig config;
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  std::unique_ptr<kube::Client> client;
  k8sbridge::slurm::RecordingSlurm slurm;
  SetCaches caches;
  RecordingMetrics metrics;
  ks::Wakeup wakeup;
  bool leader = true;
  std::function<bool()> is_leader = [this] { return leader; };
  std::unique_ptr<ks::Daemon> daemon;

  Fixture() {
    auto c =
        conf::ParseBridgeConfig(kConf, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    config = std::move(*c);
    client = kube::testing::NoRetryClient(transport, clock, log);
    // Every write answers with the object written: the executor only needs a 200.
    transport->SetFallback([](const FakeTransport::Recorded& r) {
      return FakeTransport::Json(200, r.body.empty() ? "{}" : r.body);
    });
    daemon = std::make_unique<ks::Daemon>(
        config, ks::DaemonParts{*client, nullptr, slurm, caches, [this] { return is_leader(); },
                                10s, metrics, log, wakeup});
    caches.nodes = {KubeNode("True")};
  }
  // Slurm answers `nodes`, and the daemon's poller has read them.
  void SlurmHas(std::vector<ks::SlurmNode> nodes) {
    slurm.SetNodes(std::move(nodes));
    daemon->PollSlurm();
  }
  size_t LogLines(std::string_view needle) const {
    size_t n = 0;
    for (const auto& line : log.lines())
      n += line.message.find(needle) != std::string::npos;
    return n;
  }
};

ks::SlurmSnapshot Answered(Clock::Steady::time_point when) {
  ks::SlurmSnapshot s;
  s.status = Status::Ok();
  s.when = when;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sync_daemon)

BOOST_AUTO_TEST_CASE(gate_checks_slurm_then_kubernetes_then_leadership) {
  const Clock::Steady::time_point now{1h};
  const ks::KubeHealth live{true, true, true};
  const auto max_age = ks::SlurmMaxAge(500ms);
  BOOST_TEST(max_age == Clock::Steady::duration(10s));
  BOOST_TEST(ks::SlurmMaxAge(5s) == Clock::Steady::duration(20s));

  ks::GateState g = ks::EvaluateGate(ks::SlurmSnapshot{}, now, max_age, {}, false);
  BOOST_TEST((g.gate == Gate::kSlurmUnreadable));
  BOOST_TEST(g.detail ==
             "Slurm cannot be read (unavailable: slurm_load_node has not answered yet)");
  g = ks::EvaluateGate(Answered(now - 11s), now, max_age, live, true);
  BOOST_TEST((g.gate == Gate::kSlurmUnreadable));
  BOOST_TEST(g.detail == "Slurm cannot be read (no answer to slurm_load_node for 11 s)");

  g = ks::EvaluateGate(Answered(now - 10s), now, max_age, {true, false, true}, false);
  BOOST_TEST((g.gate == Gate::kKubernetesUnreadable));
  BOOST_TEST(g.detail ==
             "Kubernetes cannot be read (pods cache live, nodes cache not synced or failing, "
             "API server answering)");
  g = ks::EvaluateGate(Answered(now), now, max_age, {true, true, false}, true);
  BOOST_TEST(g.detail ==
             "Kubernetes cannot be read (pods cache live, nodes cache live, API server failing)");

  g = ks::EvaluateGate(Answered(now), now, max_age, live, false);
  BOOST_TEST((g.gate == Gate::kNotLeader));
  BOOST_TEST(g.detail == "not the leader: watching only");
  BOOST_TEST(ks::EvaluateGate(Answered(now), now, max_age, live, true).open());

  BOOST_TEST(ks::GateReason(Gate::kSlurmUnreadable) == "slurm_unreadable");
  BOOST_TEST(ks::GateReason(Gate::kKubernetesUnreadable) == "kubernetes_unreadable");
  BOOST_TEST(ks::GateReason(Gate::kNotLeader) == "not_leader");
  BOOST_TEST(ks::GateReason(Gate::kOpen).empty());
}

BOOST_AUTO_TEST_CASE(api_answering_follows_the_latest_request_but_not_watches) {
  ks::ApiAnswering api;
  BOOST_TEST(api.answering());
  api.RequestDone("GET", 503);
  BOOST_TEST(!api.answering());
  api.RequestDone("WATCH", 200);  // an old stream still open says nothing of the server
  BOOST_TEST(!api.answering());
  api.RequestDone("PUT", 200);
  BOOST_TEST(api.answering());
  api.RequestDone("GET", 429);
  BOOST_TEST(!api.answering());
  api.RequestDone("LIST", 0);  // no answer at all
  BOOST_TEST(!api.answering());
  api.RequestDone("GET", 404);  // an answer, if not the one hoped for
  BOOST_TEST(api.answering());
}

BOOST_FIXTURE_TEST_CASE(slurm_unreadable_does_nothing_and_says_so_once, Fixture) {
  slurm.SetNodes({Idle("w-0", "maintenance")});
  slurm.FailLoads(true);
  caches.pods = {WorkerPod("w-0")};
  daemon->PollSlurm();
  BOOST_TEST(metrics.Count("slurm_load_failed") == 1);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST((daemon->RunPass().gate == Gate::kSlurmUnreadable));
    clock.Advance(500ms);
  }
  BOOST_TEST(metrics.Count("skipped:slurm_unreadable") == 3);
  BOOST_TEST(metrics.Count("fresh:slurm=0") == 3);
  BOOST_TEST(metrics.Count("fresh:kubernetes=1") == 3);
  BOOST_TEST(metrics.Count("census") == 0);  // no Slurm census from no answer
  BOOST_TEST(LogLines("Slurm cannot be read") == 1u);
  BOOST_TEST(log.Contains("nothing destructive is done until it can", LogLevel::kWarning));
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(transport->requests().empty());

  // Slurm answers again: the pass acts (mirrors the admin's drain) and says so.
  slurm.FailLoads(false);
  daemon->PollSlurm();
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(log.Contains("both sides readable and leading: reconciling", LogLevel::kInfo));
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 1);
  BOOST_TEST(metrics.Count("reconciled") == 1);
}

BOOST_FIXTURE_TEST_CASE(slurm_answer_too_old_shuts_the_gate, Fixture) {
  SlurmHas({Idle("w-0")});
  BOOST_TEST(daemon->RunPass().open());
  clock.Advance(10s);  // max(10 s, 4 x 500 ms): still fresh enough
  BOOST_TEST(daemon->RunPass().open());
  clock.Advance(1s);
  const ks::GateState g = daemon->RunPass();
  BOOST_TEST((g.gate == Gate::kSlurmUnreadable));
  BOOST_TEST(g.detail == "Slurm cannot be read (no answer to slurm_load_node for 11 s)");
  // The next answer is fresh again.
  daemon->PollSlurm();
  BOOST_TEST(daemon->RunPass().open());
}

BOOST_FIXTURE_TEST_CASE(kubernetes_unreadable_does_nothing_until_informers_sync, Fixture) {
  SlurmHas({Idle("w-0", "maintenance")});
  caches.pods = {WorkerPod("w-0")};
  caches.health = {false, false, true};  // informers not synced yet
  BOOST_TEST((daemon->RunPass().gate == Gate::kKubernetesUnreadable));
  caches.health = {true, true, false};  // synced, but the API server fails
  const ks::GateState g = daemon->RunPass();
  BOOST_TEST((g.gate == Gate::kKubernetesUnreadable));
  BOOST_TEST(g.detail.find("API server failing") != std::string::npos);
  BOOST_TEST(metrics.Count("skipped:kubernetes_unreadable") == 2);
  BOOST_TEST(metrics.Count("fresh:kubernetes=0") == 2);
  BOOST_TEST(metrics.Count("census") == 2);  // Slurm's side is still counted
  // Each change of cause is logged once.
  BOOST_TEST(LogLines("Kubernetes cannot be read") == 2u);
  BOOST_TEST(transport->requests().empty());
  BOOST_TEST(slurm.calls().empty());

  caches.health = {true, true, true};
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 1);
}

BOOST_FIXTURE_TEST_CASE(not_leader_watches_only, Fixture) {
  SlurmHas({Idle("w-0", "maintenance")});
  caches.pods = {WorkerPod("w-0")};
  leader = false;
  BOOST_TEST((daemon->RunPass().gate == Gate::kNotLeader));
  BOOST_TEST((daemon->RunPass().gate == Gate::kNotLeader));
  BOOST_TEST(metrics.Count("skipped:not_leader") == 2);
  BOOST_TEST(metrics.Count("leader=0") == 2);
  BOOST_TEST(LogLines("not the leader: watching only") == 1u);
  BOOST_TEST(!log.Contains("not the leader", LogLevel::kWarning));  // normal for a backup
  BOOST_TEST(transport->requests().empty());

  leader = true;
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("leader=1") == 1);
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 1);
}

BOOST_FIXTURE_TEST_CASE(lease_lost_mid_pass_stops_the_pass, Fixture) {
  SlurmHas({Idle("w-0", "maintenance")});
  caches.pods = {WorkerPod("w-0")};
  int asked = 0;
  is_leader = [&] { return ++asked == 1; };  // leading at the gate, not at the action
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("skipped:not_leader") == 1);
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 0);
  BOOST_TEST(transport->requests().empty());
}

BOOST_FIXTURE_TEST_CASE(pass_older_than_the_renew_deadline_acts_no_more, Fixture) {
  SlurmHas({Idle("w-0", "maintenance")});
  caches.pods = {WorkerPod("w-0")};
  caches.on_read = [this] { clock.Advance(11s); };  // a pass stuck for longer than 10 s
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("skipped:not_leader") == 1);
  BOOST_TEST(transport->requests().empty());

  caches.on_read = nullptr;
  daemon->PollSlurm();
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 1);
}

BOOST_FIXTURE_TEST_CASE(mass_action_cap_holds_every_destructive_action_back, Fixture) {
  // Two Slurm nodes on a NotReady Kubernetes node: two drains, over the cap of one.
  SlurmHas({Idle("w-0"), Idle("w-1")});
  caches.pods = {WorkerPod("w-0"), WorkerPod("w-1")};
  caches.nodes = {KubeNode("False")};
  for (int i = 0; i < 2; ++i) {
    BOOST_TEST(daemon->RunPass().open());
    clock.Advance(500ms);
  }
  BOOST_TEST(metrics.Count("skipped:mass_action") == 2);
  BOOST_TEST(LogLines("SyncMaxActionsPerPass") == 1u);  // logged once while it holds
  BOOST_TEST(slurm.calls().empty());

  // One node left in trouble: under the cap, it is drained.
  caches.pods = {WorkerPod("w-0")};
  BOOST_TEST(daemon->RunPass().open());
  BOOST_TEST(metrics.Count("action:drain=ok") == 1);
  BOOST_TEST(slurm.calls().size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(quiet_ticks_check_the_gate_but_plan_only_after_a_change, Fixture) {
  SlurmHas({Idle("w-0")});
  caches.pods = {WorkerPod("w-0")};
  BOOST_TEST(daemon->Tick(true).open());  // the first: a full pass
  BOOST_TEST(metrics.Count("reconciled") == 1);
  for (int i = 0; i < 10; ++i) {
    clock.Advance(500ms);
    daemon->PollSlurm();  // the same answer: nothing changed
    BOOST_TEST(daemon->Tick(false).open());
  }
  BOOST_TEST(metrics.Count("reconciled") == 1);  // nothing planned again
  BOOST_TEST(metrics.Count("census") == 1);
  BOOST_TEST(metrics.Count("fresh:slurm=1") == 11);  // the gate is checked every tick
  BOOST_TEST(transport->requests().empty());

  // A change (an admin drains w-0) is planned and acted on at once.
  SlurmHas({Idle("w-0", "maintenance")});
  BOOST_TEST(daemon->Tick(true).open());
  BOOST_TEST(metrics.Count("action:mirror_drain=ok") == 1);
  // The pass after an action plans again (it may need a retry) without a change...
  clock.Advance(500ms);
  daemon->Tick(false);
  BOOST_TEST(metrics.Count("reconciled") == 3);
  // ... and a quiet cluster still gets a full pass every kQuietPassEvery.
  SlurmHas({Idle("w-0")});  // the drain lifted: nothing is due any more
  daemon->Tick(true);
  metrics.Clear();
  for (auto waited = 1s; waited < ks::Daemon::kQuietPassEvery; waited += 1s) {
    clock.Advance(1s);
    daemon->PollSlurm();
    daemon->Tick(false);
  }
  BOOST_TEST(metrics.Count("reconciled") == 0);
  clock.Advance(1s);
  daemon->PollSlurm();
  daemon->Tick(false);
  BOOST_TEST(metrics.Count("reconciled") == 1);
}

BOOST_FIXTURE_TEST_CASE(a_running_grace_or_a_gate_change_makes_a_tick_plan, Fixture) {
  // w-0 is up in Slurm and has no pod: a grace (3 s) runs before it is failed.
  SlurmHas({Idle("w-0")});
  BOOST_TEST(daemon->Tick(true).open());
  for (int i = 0; i < 3; ++i) {
    clock.Advance(500ms);
    daemon->PollSlurm();
    daemon->Tick(false);
  }
  BOOST_TEST(metrics.Count("reconciled") == 4);  // every tick, while the grace runs

  // The gate closes and opens again without an informer's or Slurm's change.
  caches.pods = {WorkerPod("w-0")};
  daemon->RunPass();  // no grace any more
  metrics.Clear();
  leader = false;
  BOOST_TEST((daemon->Tick(false).gate == Gate::kNotLeader));
  leader = true;
  BOOST_TEST(daemon->Tick(false).open());
  BOOST_TEST(metrics.Count("reconciled") == 1);
  BOOST_TEST(daemon->Tick(false).open());
  BOOST_TEST(metrics.Count("reconciled") == 1);
}

BOOST_FIXTURE_TEST_CASE(a_changed_slurm_answer_wakes_the_loop, Fixture) {
  std::atomic<bool> stop{false};
  SlurmHas({Idle("w-0")});            // first answer: a change
  BOOST_TEST(wakeup.Wait(1h, stop));  // returns at once: woken
  daemon->PollSlurm();                // the same answer: no change, nothing to wake for
  stop = true;
  BOOST_TEST(!wakeup.Wait(1h, stop));
}

BOOST_AUTO_TEST_SUITE_END()
