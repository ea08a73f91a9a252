// The Reconciler's rules, one scenario each, from hand-made snapshots.
#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/slurm/node_reason.h"
#include "k8sbridge/sync/reconcile.h"
#include "k8sbridge/text.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace conf = k8sbridge::conf;
namespace kube = k8sbridge::kube;
namespace ks = k8sbridge::sync;
using k8sbridge::Clock;
using ks::ActionKind;
using ks::SlurmNode;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kConf = R"(
ClusterName=hpc1
Namespace=slurm
NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml
SyncUnschedulableGrace=20s
SyncOrphanGrace=60s
SyncCircuitBreakerThreshold=2
SyncCircuitBreakerCooldown=5m
)";

kube::Object Parse(const std::string& json) {
  auto o = kube::Object::Parse(json);
  BOOST_REQUIRE_MESSAGE(o.ok(), o.status().ToString() + ": " + json);
  return *o;
}

std::string OwnedLabels(const std::string& node, const std::string& cluster = "hpc1") {
  return R"("labels":{"app.kubernetes.io/managed-by":"k8sbridge","k8sbridge.io/cluster":")" +
         cluster + R"(","k8sbridge.io/node":")" + node + R"("})";
}

// A worker pod; `extra_meta` and `status` are JSON fragments.
kube::Object Pod(const std::string& name, const std::string& host, const std::string& phase,
                 const std::string& extra_meta = "", const std::string& status_extra = "",
                 bool owned = true) {
  std::string meta = R"("name":")" + name + R"(","namespace":"slurm","uid":"u-)" + name + "\"";
  if (owned)
    meta += "," + OwnedLabels(name);
  if (!extra_meta.empty())
    meta += "," + extra_meta;
  std::string spec = host.empty() ? "{}" : R"({"nodeName":")" + host + "\"}";
  std::string status =
      R"({"phase":")" + phase + "\"" + (status_extra.empty() ? "" : ",") + status_extra + "}";
  return Parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{)" + meta + R"(},"spec":)" + spec +
               R"(,"status":)" + status + "}");
}

kube::Object Node(const std::string& name, const std::string& ready = "True",
                  const std::string& spec_extra = "", const std::string& annotations = "") {
  std::string spec = "{" + spec_extra + "}";
  // What the node controller writes for a silent kubelet, and a kubelet for itself.
  const std::string why =
      ready == "Unknown"
          ? R"("reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status.")"
          : R"("reason":"KubeletNotReady","message":"container runtime is down")";
  return Parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
               R"(","annotations":{)" + annotations + R"(}},"spec":)" + spec +
               R"(,"status":{"conditions":[{"type":"Ready","status":")" + ready + "\"," + why +
               "}]}}");
}

SlurmNode Up(const std::string& name) {
  SlurmNode n;
  n.name = name;
  n.base = SlurmNode::Base::kIdle;
  n.cloud = true;
  return n;
}

SlurmNode Drained(const std::string& name, const std::string& reason) {
  SlurmNode n = Up(name);
  n.drain = true;
  n.reason = reason;
  n.reason_user = "root";
  n.reason_time = 1'800'000'000;
  return n;
}

SlurmNode PoweredDown(const std::string& name) {
  SlurmNode n = Up(name);
  n.powered_down = true;
  return n;
}

SlurmNode FailedDown(const std::string& name, const std::string& reason) {
  SlurmNode n = PoweredDown(name);
  n.base = SlurmNode::Base::kDown;
  n.reason = reason;
  return n;
}

struct Fixture {
  conf::BridgeConfig config;
  std::unique_ptr<ks::Reconciler> r;
  Clock::Steady::time_point now{std::chrono::hours(1)};
  Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};

  Fixture() {
    auto c =
        conf::ParseBridgeConfig(kConf, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    config = std::move(*c);
    r = std::make_unique<ks::Reconciler>(ks::ReconcileOptions::From(config));
  }
  std::vector<ks::Action> Plan(const ks::World& w, Clock::Steady::duration advance = {}) {
    now += advance;
    wall += std::chrono::duration_cast<Clock::Wall::duration>(advance);
    return r->Plan(w, now, wall);
  }
};

std::vector<std::string> Strings(const std::vector<ks::Action>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions)
    out.push_back(a.ToString());
  return out;
}

const ks::Action* Find(const std::vector<ks::Action>& actions, ActionKind kind,
                       const std::string& target) {
  for (const auto& a : actions) {
    if (a.kind == kind && a.target == target)
      return &a;
  }
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reconcile)

BOOST_FIXTURE_TEST_CASE(steady_state_plans_nothing, Fixture) {
  ks::World w{{Up("w-0"), PoweredDown("w-1")}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
  BOOST_TEST(Plan(w).empty());
  BOOST_TEST(Plan(w, 1h).empty());
}

BOOST_FIXTURE_TEST_CASE(admin_hardware_drain_cordons_taints_and_mirrors, Fixture) {
  ks::World w{{Drained("w-0", "[hardware] xid 79")}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
  auto actions = Plan(w);
  const auto* mirror = Find(actions, ActionKind::kMirrorDrain, "w-0");
  BOOST_REQUIRE(mirror);
  BOOST_TEST(mirror->drain_reason == "[hardware] xid 79");
  BOOST_TEST(mirror->drain_user == "root");
  BOOST_TEST(mirror->drain_time == "2027-01-15T08:00:00Z");
  const auto* cordon = Find(actions, ActionKind::kCordon, "n-0");
  BOOST_REQUIRE(cordon);
  BOOST_TEST(cordon->slurm_nodes == std::vector<std::string>{"w-0"});
  BOOST_TEST(actions.size() == 2u, Strings(actions).size());
}

BOOST_FIXTURE_TEST_CASE(non_hardware_drain_is_mirrored_only, Fixture) {
  ks::World w{{Drained("w-0", "maintenance")}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
  auto actions = Plan(w);
  BOOST_TEST(Find(actions, ActionKind::kMirrorDrain, "w-0"));
  BOOST_TEST(!Find(actions, ActionKind::kCordon, "n-0"));
  BOOST_TEST(actions.size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(hardware_pattern_matches_the_documented_defaults, Fixture) {
  // k8sbridge-health tags its hardware findings the same way.
  for (std::string reason :
       {"[hardware] gpu 3", "XID 79 on GPU 2", "ecc uncorrectable", "  NVLink down",
        "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)"}) {
    ks::World w{{Drained("w-0", reason)}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
    BOOST_TEST(Find(Plan(w), ActionKind::kCordon, "n-0"), reason);
  }
  for (std::string reason : {"k8sbridge: xid", "reboot for xid driver", "hardware"}) {
    ks::World w{{Drained("w-0", reason)}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
    BOOST_TEST(!Find(Plan(w), ActionKind::kCordon, "n-0"), reason);
  }
}

BOOST_FIXTURE_TEST_CASE(applied_cordon_is_steady, Fixture) {
  std::string taint =
      R"("unschedulable":true,"taints":[{"key":"k8sbridge.io/hardware","value":"hpc1","effect":"NoSchedule"}])";
  std::string ann = R"("k8sbridge.io/cordoned-by":"hpc1","k8sbridge.io/hardware-drains":"w-0",)"
                    R"("k8sbridge.io/slurm-drain-reason":"x")";
  std::string pod_ann =
      R"("annotations":{"k8sbridge.io/slurm-drain-reason":"[hardware] xid 79",)"
      R"("k8sbridge.io/slurm-drain-user":"root","k8sbridge.io/slurm-drain-time":"2027-01-15T08:00:00Z"})";
  ks::World w{{Drained("w-0", "[hardware] xid 79")},
              {Pod("w-0", "n-0", "Running", pod_ann)},
              {Node("n-0", "True", taint, ann)}};
  auto actions = Plan(w);
  BOOST_TEST(actions.empty(), Strings(actions).size());
  // Our own cordon and taint do not drain the node's other Slurm nodes.
  w.slurm.push_back(Up("w-1"));
  w.pods.push_back(Pod("w-1", "n-0", "Running"));
  BOOST_TEST(Plan(w).empty());

  // Resume: everything we set is undone.
  w.slurm[0] = Up("w-0");
  actions = Plan(w);
  BOOST_TEST(Find(actions, ActionKind::kClearDrain, "w-0"));
  BOOST_TEST(Find(actions, ActionKind::kUncordon, "n-0"));
}

BOOST_FIXTURE_TEST_CASE(hardware_cordon_remembers_nodes_whose_pod_is_gone, Fixture) {
  std::string taint =
      R"("unschedulable":true,"taints":[{"key":"k8sbridge.io/hardware","value":"hpc1","effect":"NoSchedule"}])";
  std::string ann = R"("k8sbridge.io/cordoned-by":"hpc1","k8sbridge.io/hardware-drains":"w-0")";
  SlurmNode n = Drained("w-0", "[hardware] xid 79");
  n.powered_down = true;
  ks::World w{{n}, {}, {Node("n-0", "True", taint, ann)}};
  BOOST_TEST(Plan(w).empty());
}

BOOST_FIXTURE_TEST_CASE(foreign_cordon_is_never_lifted_and_drains_with_our_reason, Fixture) {
  ks::World w{{Up("w-0")},
              {Pod("w-0", "n-0", "Running")},
              {Node("n-0", "True", R"("unschedulable":true)")}};
  auto actions = Plan(w);
  const auto* drain = Find(actions, ActionKind::kDrain, "w-0");
  BOOST_REQUIRE(drain);
  BOOST_TEST(drain->reason == "k8sbridge: Kubernetes node n-0 cordoned");
  BOOST_TEST(!Find(actions, ActionKind::kUncordon, "n-0"));
  BOOST_TEST(actions.size() == 1u);

  // A hardware drain on a node someone else cordoned: our taint, no cordon marker.
  w.slurm[0] = Drained("w-0", "[hardware] ecc");
  actions = Plan(w);
  BOOST_TEST(Find(actions, ActionKind::kCordon, "n-0"));
  // Undo after resume: uncordon only removes our marks (the executor keeps the cordon).
  std::string taint =
      R"("unschedulable":true,"taints":[{"key":"k8sbridge.io/hardware","value":"hpc1","effect":"NoSchedule"}])";
  w.nodes[0] = Node("n-0", "True", taint, R"("k8sbridge.io/hardware-drains":"w-0")");
  w.slurm[0] = Drained("w-0", "k8sbridge: Kubernetes node n-0 cordoned");
  actions = Plan(w);
  BOOST_TEST(Find(actions, ActionKind::kUncordon, "n-0"));
  BOOST_TEST(!Find(actions, ActionKind::kUndrain, "w-0"));  // still cordoned by someone
}

// Ready False: the kubelet posts and says NotReady. Its pods' status is current, so
// the pod rules see what really fails; the node is drained meanwhile.
BOOST_FIXTURE_TEST_CASE(not_ready_node_drains_and_recovery_undrains_only_ours, Fixture) {
  ks::World w{{Up("w-0"), Drained("w-1", "admin: bad fan")},
              {Pod("w-0", "n-0", "Running"), Pod("w-1", "n-0", "Running")},
              {Node("n-0", "False")}};
  auto actions = Plan(w);
  const auto* drain = Find(actions, ActionKind::kDrain, "w-0");
  BOOST_REQUIRE(drain);
  BOOST_TEST(drain->reason ==
             "k8sbridge: Kubernetes node n-0 NotReady (False): KubeletNotReady: "
             "container runtime is down");
  BOOST_TEST(!Find(actions, ActionKind::kFail, "w-0"));
  BOOST_TEST(!Find(actions, ActionKind::kDrain, "w-1"));
  BOOST_TEST(ks::TroubleNodeOf(drain->reason) == "n-0");

  w.slurm[0] = Drained("w-0", drain->reason);
  actions = Plan(w);
  BOOST_TEST(!Find(actions, ActionKind::kUndrain, "w-0"));
  BOOST_TEST(!Find(actions, ActionKind::kDrain, "w-0"));

  w.nodes[0] = Node("n-0");
  actions = Plan(w);
  BOOST_TEST(Find(actions, ActionKind::kUndrain, "w-0"));
  BOOST_TEST(!Find(actions, ActionKind::kUndrain, "w-1"));
}

// Ready Unknown (the kubelet stopped posting), the unreachable taint, or a Node object
// deleted under a pod: DOWN at once (its jobs requeue), then POWER_DOWN, with what
// Kubernetes said; never a drain. A foreign reason is the executor's to keep.
BOOST_FIXTURE_TEST_CASE(lost_node_fails_its_slurm_nodes_at_once, Fixture) {
  const std::string unreachable =
      R"("taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}])";
  ks::World w{
      {Up("w-0"), Drained("w-1", "admin: bad fan"), Up("w-2"), Up("w-3"), Up("w-4")},
      {Pod("w-0", "n-0", "Running"), Pod("w-1", "n-0", "Running"), Pod("w-2", "n-1", "Running"),
       Pod("w-3", "n-9", "Running"), Pod("w-4", "n-2", "Running")},
      {Node("n-0", "Unknown"), Node("n-1", "True", unreachable), Node("n-2")}};
  auto actions = Plan(w);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason ==
             "k8sbridge: Kubernetes node n-0 lost: Ready Unknown: NodeStatusUnknown: Kubelet "
             "stopped posting node status.");
  BOOST_TEST((fail->rule == ks::Rule::kNodeLost));
  BOOST_TEST(fail->k8s_node == "n-0");
  BOOST_TEST(fail->pod_name == "w-0");
  BOOST_TEST(Find(actions, ActionKind::kFail, "w-1"));
  BOOST_REQUIRE(Find(actions, ActionKind::kFail, "w-2"));
  BOOST_TEST(Find(actions, ActionKind::kFail, "w-2")->reason ==
             "k8sbridge: Kubernetes node n-1 lost: taint node.kubernetes.io/unreachable");
  BOOST_REQUIRE(Find(actions, ActionKind::kFail, "w-3"));
  BOOST_TEST(Find(actions, ActionKind::kFail, "w-3")->reason ==
             "k8sbridge: Kubernetes node n-9 is gone (no Node object)");
  BOOST_TEST(!Find(actions, ActionKind::kFail, "w-4"));
  for (std::string name : {"w-0", "w-1", "w-2", "w-3"})
    BOOST_TEST(!Find(actions, ActionKind::kDrain, name), name);
  // Cordoned alone: a drain, as before.
  ks::World c{{Up("w-0")},
              {Pod("w-0", "n-0", "Running")},
              {Node("n-0", "True", R"("unschedulable":true)")}};
  auto cordoned = Plan(c);
  BOOST_TEST(Find(cordoned, ActionKind::kDrain, "w-0"));
  BOOST_TEST(!Find(cordoned, ActionKind::kFail, "w-0"));
}

// In an outage (ResetTimers) the kubelets could not post either, and the node
// controller may call live nodes lost until they post again: a lost node fails
// nothing for SyncOutageHold from the first pass after it, then fails as above if
// it is still lost; a node whose kubelet posts again meanwhile fails nothing.
BOOST_FIXTURE_TEST_CASE(a_node_lost_in_the_wake_of_an_outage_is_held, Fixture) {
  ks::World w{{Up("w-0"), Up("w-1")},
              {Pod("w-0", "n-0", "Running"), Pod("w-1", "n-1", "Running")},
              {Node("n-0", "Unknown"), Node("n-1", "Unknown")}};
  r->ResetTimers();
  BOOST_TEST(!Find(Plan(w), ActionKind::kFail, "w-0"));
  BOOST_TEST(r->Waiting());  // a pass is due when the hold ends
  BOOST_TEST(!Find(Plan(w, 29s), ActionKind::kFail, "w-0"));
  w.nodes[1] = Node("n-1");  // its kubelet posted again
  auto actions = Plan(w, 1s);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST((fail->rule == ks::Rule::kNodeLost));
  BOOST_TEST(!Find(actions, ActionKind::kFail, "w-1"));
}

// The old pod stays Terminating on the lost node (no kubelet confirms): it holds back
// neither the return to service nor a replacement, and is never the node's pod
// beside a live one, even when its node comes back and it terminates for real.
BOOST_FIXTURE_TEST_CASE(a_pod_stranded_on_a_lost_node_counts_as_none, Fixture) {
  const std::string deleting = R"("deletionTimestamp":"2027-01-15T08:00:00Z")";
  const std::string reason = "k8sbridge: Kubernetes node n-0 lost: Ready Unknown";
  ks::World w{{FailedDown("w-0", reason)},
              {Pod("w-0", "n-0", "Running", deleting)},
              {Node("n-0", "Unknown"), Node("n-1")}};
  BOOST_TEST(Find(Plan(w), ActionKind::kResume, "w-0"));
  // On a Ready node the pod will go: wait for it.
  w.nodes[0] = Node("n-0");
  BOOST_TEST(!Find(Plan(w), ActionKind::kResume, "w-0"));
  w.nodes[0] = Node("n-0", "Unknown");

  // Resumed: a replacement under a fresh name runs on n-1.
  kube::Object replacement =
      Parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"w-0.1","namespace":"slurm",)"
            R"("uid":"u-w-0.1","creationTimestamp":"2027-01-15T08:01:00Z",)" +
            OwnedLabels("w-0") + R"(},"spec":{"nodeName":"n-1"},"status":{"phase":"Running"}})");
  w.slurm = {Up("w-0")};
  w.pods.push_back(replacement);
  BOOST_TEST(Strings(Plan(w)).empty());
  BOOST_TEST(Strings(Plan(w, 1h)).empty());
  w.nodes[0] = Node("n-0");  // back: the old pod terminates for real
  BOOST_TEST(Strings(Plan(w)).empty());
  // A second live pod of the node (an older one whose delete failed) is an orphan.
  kube::Object older = replacement;
  older.SetString("/metadata/name", "w-0.2");
  older.SetString("/metadata/uid", "u-w-0.2");
  older.SetString("/metadata/creationTimestamp", "2027-01-15T07:00:00Z");
  w.pods.push_back(older);
  Plan(w);
  const auto second_actions = Plan(w, 61s);
  const auto* second = Find(second_actions, ActionKind::kDeletePod, "w-0");
  BOOST_REQUIRE(second);
  BOOST_TEST(second->pod_name == "w-0.2");
  BOOST_TEST(second->reason == "a second pod of Slurm node w-0 (pod w-0.1 serves it)");
  w.pods.pop_back();
  // The replacement is what the drain mirror annotates.
  w.slurm = {Drained("w-0", "admin: bad fan")};
  const auto mirrors = Plan(w);
  const auto* mirror = Find(mirrors, ActionKind::kMirrorDrain, "w-0");
  BOOST_REQUIRE(mirror);
  BOOST_TEST(mirror->pod_name == "w-0.1");
  // Powered down with the replacement left: an orphan, deleted by its own name.
  w.slurm = {PoweredDown("w-0")};
  Plan(w);
  const auto orphans = Plan(w, 61s);
  const auto* orphan = Find(orphans, ActionKind::kDeletePod, "w-0");
  BOOST_REQUIRE(orphan);
  BOOST_TEST(orphan->pod_name == "w-0.1");
  BOOST_TEST(orphan->uid == "u-w-0.1");
}

BOOST_FIXTURE_TEST_CASE(no_execute_taint_drains_but_our_taint_does_not, Fixture) {
  ks::World w{
      {Up("w-0")},
      {Pod("w-0", "n-0", "Running")},
      {Node("n-0", "True", R"("taints":[{"key":"repair","value":"gpu","effect":"NoExecute"}])")}};
  auto actions = Plan(w);
  BOOST_REQUIRE(Find(actions, ActionKind::kDrain, "w-0"));
  BOOST_TEST(Find(actions, ActionKind::kDrain, "w-0")->reason ==
             "k8sbridge: Kubernetes node n-0 has taint repair:NoExecute");
}

BOOST_FIXTURE_TEST_CASE(failed_pod_fails_the_node_at_once, Fixture) {
  std::string cs =
      R"("containerStatuses":[{"name":"slurmd","state":{"terminated":{"reason":"OOMKilled","exitCode":137}}}])";
  ks::World w{{Up("w-0")}, {Pod("w-0", "n-0", "Failed", "", cs)}, {Node("n-0")}};
  auto actions = Plan(w);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason == "k8sbridge: pod w-0 failed: OOMKilled, exit code 137");
  // Once Slurm has it DOWN, nothing more.
  w.slurm[0].base = SlurmNode::Base::kDown;
  w.slurm[0].power_down = true;
  w.slurm[0].reason = fail->reason;
  BOOST_TEST(Plan(w).empty());
}

BOOST_FIXTURE_TEST_CASE(a_failed_pods_reason_quotes_the_error_that_ended_its_log, Fixture) {
  // No termination message of its own: the kubelet quotes the log's tail
  // (FallbackToLogsOnError), info lines first, and the reason would be cut
  // before it reached the error.
  std::string log_tail =
      R"(2026-12-01T15:04:05Z k8sbridge-worker: info: slurmd is Slurm 24.11.5, as built for\n)"
      R"(2026-12-01T15:04:05Z k8sbridge-worker: info: munge key checked against the controller's\n)"
      R"(2026-12-01T15:04:06Z k8sbridge-worker: info: jail /jail prepared, running slurmd -D -b\n)"
      R"(slurmd: error: Couldn't find the specified plugin name for node_features/k9s\n)"
      R"(slurmd: fatal: Unable to initialize node_features plugin\n)";
  std::string cs = R"("containerStatuses":[{"name":"slurmd","state":{"terminated":)"
                   R"({"reason":"Error","exitCode":1,"message":")" +
                   log_tail + R"("}}}])";
  ks::World w{{Up("w-0")}, {Pod("w-0", "n-0", "Failed", "", cs)}, {Node("n-0")}};
  auto actions = Plan(w);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason ==
             "k8sbridge: pod w-0 failed: Error, exit code 1: slurmd: fatal: Unable to initialize "
             "node_features plugin");
}

BOOST_FIXTURE_TEST_CASE(evicted_pod_fails_the_node, Fixture) {
  std::string meta = R"("deletionTimestamp":"2027-01-15T08:00:00Z")";
  std::string cond =
      R"("conditions":[{"type":"DisruptionTarget","status":"True","reason":"EvictionByEvictionAPI","message":"Eviction API: evicting"}])";
  ks::World w{{Up("w-0")}, {Pod("w-0", "n-0", "Running", meta, cond)}, {Node("n-0")}};
  auto actions = Plan(w);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason ==
             "k8sbridge: pod w-0 evicted (EvictionByEvictionAPI): Eviction API: evicting");
}

BOOST_FIXTURE_TEST_CASE(lost_pod_fails_after_a_short_confirmation, Fixture) {
  ks::World w{{Up("w-0")}, {}, {Node("n-0")}};
  BOOST_TEST(Plan(w).empty());
  BOOST_TEST(Plan(w, 1s).empty());
  auto actions = Plan(w, 2s);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason == "k8sbridge: pod w-0 was deleted out from under Slurm");
}

BOOST_FIXTURE_TEST_CASE(suspending_and_non_group_nodes_are_left_to_slurm, Fixture) {
  SlurmNode going = Up("w-0");
  going.powering_down = true;
  SlurmNode other = Up("login-1");  // in no node group
  ks::World w{{going, other}, {}, {}};
  BOOST_TEST(Plan(w).empty());
  BOOST_TEST(Plan(w, 1h).empty());
}

BOOST_FIXTURE_TEST_CASE(unschedulable_pod_fails_after_grace_with_the_scheduler_message, Fixture) {
  std::string cond =
      R"("conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}])";
  SlurmNode n = Up("w-0");
  n.powering_up = true;
  ks::World w{{n}, {Pod("w-0", "", "Pending", "", cond)}, {}};
  BOOST_TEST(Plan(w).empty());
  BOOST_TEST(Plan(w, 19s).empty());
  auto actions = Plan(w, 1s);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason == "k8sbridge: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");
}

BOOST_FIXTURE_TEST_CASE(breaker_opens_drains_the_group_and_closes_after_cooldown, Fixture) {
  std::string cond =
      R"("conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"no room"}])";
  SlurmNode a = Up("w-0"), b = Up("w-1");
  a.powering_up = b.powering_up = true;
  ks::World w{{a, b, PoweredDown("w-2")},
              {Pod("w-0", "", "Pending", "", cond), Pod("w-1", "", "Pending", "", cond)},
              {}};
  Plan(w);
  auto actions = Plan(w, 20s);
  BOOST_TEST(Find(actions, ActionKind::kFail, "w-0"));
  BOOST_TEST(Find(actions, ActionKind::kFail, "w-1"));
  const auto* drain = Find(actions, ActionKind::kDrain, "w-2");
  BOOST_REQUIRE(drain);
  BOOST_TEST(drain->reason.starts_with(
                 "k8sbridge: circuit breaker open for node group gpu until 2027-01-15T08:05:20Z"),
             drain->reason);
  BOOST_TEST(r->OpenBreakers(wall).count("gpu") == 1u);

  // The drain, read back (even by a restarted daemon), is undone after the cool-down.
  SlurmNode drained = PoweredDown("w-2");
  drained.drain = true;
  drained.reason = drain->reason;
  ks::World later{{drained}, {}, {}};
  ks::Reconciler fresh(ks::ReconcileOptions::From(config));
  BOOST_TEST(fresh.Plan(later, now, wall).empty());
  auto done = fresh.Plan(later, now + 5min, wall + 5min);
  BOOST_TEST(Find(done, ActionKind::kUndrain, "w-2"));
}

BOOST_FIXTURE_TEST_CASE(orphans_are_deleted_after_grace_and_foreign_pods_never, Fixture) {
  ks::World w{{PoweredDown("w-0")},
              {Pod("w-0", "n-0", "Running"), Pod("w-9", "n-0", "Running"),
               Pod("w-5", "n-0", "Running", "", "", /*owned=*/false)},
              {Node("n-0")}};
  BOOST_TEST(Plan(w).empty());
  auto actions = Plan(w, 60s);
  BOOST_TEST(Find(actions, ActionKind::kDeletePod, "w-0"));
  BOOST_TEST(Find(actions, ActionKind::kDeletePod, "w-0")->uid == "u-w-0");
  BOOST_TEST(Find(actions, ActionKind::kDeletePod, "w-9"));  // Slurm has no such node
  BOOST_TEST(!Find(actions, ActionKind::kDeletePod, "w-5"));
  BOOST_TEST(actions.size() == 2u);

  // Another cluster's pod is not ours either.
  ks::World other{
      {},
      {Parse(R"({"metadata":{"name":"w-1","uid":"x",)" + OwnedLabels("w-1", "other") + "}}")},
      {}};
  Plan(other);
  BOOST_TEST(Plan(other, 1h).empty());
}

BOOST_FIXTURE_TEST_CASE(a_slurm_with_no_nodes_orphans_no_pod, Fixture) {
  ks::World w{{}, {Pod("w-0", "n-0", "Running"), Pod("w-1", "n-0", "Running")}, {Node("n-0")}};
  Plan(w);
  BOOST_TEST(!Find(Plan(w, 1h), ActionKind::kDeletePod, "w-0"));
  // One node back in Slurm's answer: the pod without a Slurm node is an orphan again.
  w.slurm = {Up("w-0")};
  Plan(w);
  BOOST_TEST(Find(Plan(w, 60s), ActionKind::kDeletePod, "w-1"));
}

BOOST_FIXTURE_TEST_CASE(powering_up_without_a_pod_fails_after_grace, Fixture) {
  SlurmNode n = Up("w-0");
  n.powering_up = true;
  ks::World w{{n}, {}, {}};
  BOOST_TEST(Plan(w).empty());
  BOOST_TEST(Plan(w, 59s).empty());
  auto actions = Plan(w, 1s);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST(fail->reason == "k8sbridge: no pod for w-0 after 60s POWERING_UP");
}

BOOST_FIXTURE_TEST_CASE(reset_timers_restarts_every_grace, Fixture) {
  ks::World w{{PoweredDown("w-0")}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
  Plan(w);
  r->ResetTimers();
  BOOST_TEST(Plan(w, 59s).empty());  // the grace starts again here
  BOOST_TEST(Plan(w, 59s).empty());
  auto actions = Plan(w, 1s);
  BOOST_TEST(Find(actions, ActionKind::kDeletePod, "w-0"));
}

BOOST_FIXTURE_TEST_CASE(resume_latency_is_measured_from_powering_up, Fixture) {
  SlurmNode n = Up("w-0");
  n.powering_up = true;
  ks::World w{{n}, {Pod("w-0", "n-0", "Running")}, {Node("n-0")}};
  Plan(w);
  w.slurm[0].powering_up = false;
  Plan(w, 7s);
  auto l = r->TakeResumeLatencies();
  BOOST_REQUIRE(l.size() == 1u);
  BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(l[0]).count() == 7);
}

// Slurm 24.11 keeps a node DOWN after its power-down (down~): only nodes k8sbridge
// failed, fully powered down, without a pod, are returned to service.
BOOST_FIXTURE_TEST_CASE(failed_powered_down_nodes_of_ours_return_to_service, Fixture) {
  SlurmNode suspending = FailedDown("w-3", "k8sbridge: pod w-3 deleted");
  suspending.powered_down = false;
  suspending.powering_down = true;
  SlurmNode other = FailedDown("login-1", "k8sbridge: pod login-1 deleted");  // no group
  ks::World w{{FailedDown("w-0", "k8sbridge: pod w-0 evicted (EvictionByEvictionAPI)"),
               FailedDown("w-1", "admin: broken PSU"), FailedDown("w-2", "ResumeTimeout reached"),
               suspending, FailedDown("w-4", "k8sbridge: pod w-4 failed"),
               FailedDown("w-5", "k8sbridge-health: GPU 3 XID 79"),
               FailedDown("w-6", "spank_jail: cannot prepare"), other},
              {Pod("w-4", "n-0", "Failed")},
              {Node("n-0")}};
  auto actions = Plan(w);
  const auto* resume = Find(actions, ActionKind::kResume, "w-0");
  BOOST_REQUIRE(resume);
  BOOST_TEST(resume->reason.find("EvictionByEvictionAPI") != std::string::npos, resume->reason);
  for (std::string name : {"w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "login-1"})
    BOOST_TEST(!Find(actions, ActionKind::kResume, name), name);
  BOOST_TEST(ks::Returnable(w.slurm[0], wall));
  BOOST_TEST(!ks::Returnable(w.slurm[1], wall));
}

// slurmctld's RESUME of a DOWN, powered-down node (an admin's, or an older return)
// leaves it IDLE+POWERED_DOWN+NOT_RESPONDING; a restarted slurmctld never makes such
// a node available again (read_config.c), so it gets a fresh power-down, which
// clears NOT_RESPONDING. A node being resumed, drained, or already asked to power
// down or up is left alone, as is one outside the node groups.
BOOST_FIXTURE_TEST_CASE(an_idle_powered_down_node_left_not_responding_is_powered_down_again,
                        Fixture) {
  auto stale = [](const std::string& name) {
    SlurmNode n = PoweredDown(name);
    n.not_responding = true;
    return n;
  };
  SlurmNode resuming = stale("w-1");
  resuming.powered_down = false;
  resuming.powering_up = true;
  SlurmNode drained = stale("w-2");
  drained.drain = true;
  SlurmNode asked_down = stale("w-3");
  asked_down.power_down = true;
  SlurmNode asked_up = stale("w-4");
  asked_up.power_up = true;
  SlurmNode down = stale("w-5");
  down.base = SlurmNode::Base::kDown;
  ks::World w{{stale("w-0"), resuming, drained, asked_down, asked_up, down, stale("login-1"),
               PoweredDown("w-6")},
              {},
              {}};
  auto actions = Plan(w);
  const auto* renew = Find(actions, ActionKind::kRenewPowerDown, "w-0");
  BOOST_REQUIRE(renew);
  BOOST_TEST(renew->reason.find("NOT_RESPONDING") != std::string::npos, renew->reason);
  for (std::string name : {"w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "login-1"})
    BOOST_TEST(!Find(actions, ActionKind::kRenewPowerDown, name), name);
  // The executor's live re-check: Slurm resumed it for a job meanwhile.
  BOOST_TEST(ks::NotDueOn(*renew, stale("w-0"), wall).empty());
  BOOST_TEST(!ks::NotDueOn(*renew, resuming, wall).empty());
  BOOST_TEST(!ks::NotDueOn(*renew, PoweredDown("w-0"), wall).empty());
}

// With ReturnToService=1 a pod whose first registration slurmctld answered late is
// set DOWN by Slurm as "Node unexpectedly rebooted"; powered down without a pod, it
// is returned like ours. An admin's reason on such a node stays (Slurm keeps it).
BOOST_FIXTURE_TEST_CASE(a_late_registrations_reboot_reason_returns_to_service, Fixture) {
  SlurmNode up = FailedDown("w-1", "Node unexpectedly rebooted");
  up.powered_down = false;  // not yet powered down: its pod may still be there
  ks::World w{{FailedDown("w-0", "Node unexpectedly rebooted"), up,
               FailedDown("w-2", "Node unexpectedly rebooted by me")},
              {},
              {}};
  auto actions = Plan(w);
  const auto* resume = Find(actions, ActionKind::kResume, "w-0");
  BOOST_REQUIRE(resume);
  BOOST_TEST(resume->reason.find("a pod's late registration") != std::string::npos, resume->reason);
  BOOST_TEST(!Find(actions, ActionKind::kResume, "w-1"));
  BOOST_TEST(!Find(actions, ActionKind::kResume, "w-2"));
}

// A breaker's drain keeps its nodes out of service until its expiry (read from the
// reason, so a restarted daemon knows it too).
BOOST_FIXTURE_TEST_CASE(breaker_drained_down_nodes_wait_for_the_cooldown, Fixture) {
  SlurmNode n = FailedDown("w-2", std::string(ks::kBreakerPrefix) +
                                      "gpu until 2027-01-15T08:05:00Z: 2 unschedulable pods "
                                      "within 300s");
  n.drain = true;
  ks::World w{{n}, {}, {}};
  BOOST_TEST(!Find(Plan(w), ActionKind::kResume, "w-2"));
  auto later = Plan(w, 5min);
  BOOST_TEST(Find(later, ActionKind::kResume, "w-2"));
}

// The executor re-checks each rule on a live read of the node.
BOOST_AUTO_TEST_CASE(actions_are_rechecked_on_the_live_node) {
  const Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};
  ks::Action fail{ActionKind::kFail, "w-0", "k8sbridge: pod w-0 deleted"};
  fail.rule = ks::Rule::kPodFailed;
  SlurmNode live = Up("w-0");
  BOOST_TEST(ks::NotDueOn(fail, live, wall).empty());
  live.powering_down = true;
  BOOST_TEST(!ks::NotDueOn(fail, live, wall).empty());
  fail.rule = ks::Rule::kNoPodStarting;
  BOOST_TEST(!ks::NotDueOn(fail, Up("w-0"), wall).empty());  // registered meanwhile
  ks::Action drain{ActionKind::kDrain, "w-0", "k8sbridge: Kubernetes node n-0 cordoned"};
  drain.rule = ks::Rule::kNodeTrouble;
  BOOST_TEST(!ks::NotDueOn(drain, Drained("w-0", "admin"), wall).empty());
  drain.rule = ks::Rule::kBreaker;
  BOOST_TEST(ks::NotDueOn(drain, PoweredDown("w-0"), wall).empty());
  BOOST_TEST(!ks::NotDueOn(drain, Up("w-0"), wall).empty());
}

BOOST_FIXTURE_TEST_CASE(planned_fails_and_drains_name_their_rule, Fixture) {
  ks::World w{{Up("w-0")}, {}, {Node("n-0")}};
  Plan(w);
  auto lost = Plan(w, 3s);
  BOOST_REQUIRE(Find(lost, ActionKind::kFail, "w-0"));
  BOOST_TEST((Find(lost, ActionKind::kFail, "w-0")->rule == ks::Rule::kPodLost));
  SlurmNode starting = Up("w-1");
  starting.powering_up = true;
  ks::World s{{starting}, {}, {}};
  Plan(s);
  auto start = Plan(s, 60s);
  BOOST_REQUIRE(Find(start, ActionKind::kFail, "w-1"));
  BOOST_TEST((Find(start, ActionKind::kFail, "w-1")->rule == ks::Rule::kNoPodStarting));
}

// slurmctld killed after slurmd's registration but before its state save: the node
// comes back POWERING_UP beside a Ready pod and nothing asks slurmd again. After
// SyncRegistrationGrace (120 s) the node is failed (jobs requeue, DOWN+POWER_DOWN,
// then returned), not left to ResumeTimeout and down~; a pod still starting, or one
// not Ready, is not a lost registration.
BOOST_FIXTURE_TEST_CASE(a_registration_lost_by_slurmctld_fails_the_node_after_the_grace, Fixture) {
  SlurmNode n = Up("w-0");
  n.powering_up = true;
  const std::string ready = R"("conditions":[{"type":"Ready","status":"True"}])";
  const std::string not_ready = R"("conditions":[{"type":"Ready","status":"False"}])";
  ks::World starting{{n}, {Pod("w-0", "n-0", "Running", "", not_ready)}, {Node("n-0")}};
  Plan(starting);
  BOOST_TEST(!Find(Plan(starting, 10min), ActionKind::kFail, "w-0"));
  ks::World w{{n}, {Pod("w-0", "n-0", "Running", "", ready)}, {Node("n-0")}};
  BOOST_TEST(!Find(Plan(w), ActionKind::kFail, "w-0"));
  BOOST_TEST(r->Waiting());  // the grace runs
  BOOST_TEST(!Find(Plan(w, 119s), ActionKind::kFail, "w-0"));
  auto actions = Plan(w, 1s);
  const auto* fail = Find(actions, ActionKind::kFail, "w-0");
  BOOST_REQUIRE(fail);
  BOOST_TEST((fail->rule == ks::Rule::kRegistrationLost));
  BOOST_TEST(fail->uid == "u-w-0");
  BOOST_TEST(fail->reason ==
                 "k8sbridge: pod w-0 Ready for 120s but w-0 never registered (slurmctld "
                 "restarted?)",
             fail->reason);
  // Registered in between: the executor's live read keeps the node.
  const Clock::Wall::time_point wall_now{std::chrono::seconds(1'800'000'000)};
  BOOST_TEST(!ks::NotDueOn(*fail, Up("w-0"), wall_now).empty());
  BOOST_TEST(ks::NotDueOn(*fail, n, wall_now).empty());
  // Once registered, a Ready pod is the normal case.
  ks::World registered{{Up("w-0")}, {Pod("w-0", "n-0", "Running", "", ready)}, {Node("n-0")}};
  BOOST_TEST(!Find(Plan(registered, 10min), ActionKind::kFail, "w-0"));
}

BOOST_AUTO_TEST_CASE(reasons_are_one_short_line) {
  std::string long_text(300, 'x');
  BOOST_TEST(k8sbridge::BridgeReason(long_text).size() == k8sbridge::kMaxBridgeReason);
  BOOST_TEST(k8sbridge::BridgeReason("a\nb") == "k8sbridge: a b");
  auto t = ks::ParseTime("2027-01-15T08:00:00Z");
  BOOST_REQUIRE(t);
  BOOST_TEST(ks::FormatTime(*t) == "2027-01-15T08:00:00Z");
  BOOST_TEST(!ks::ParseTime("yesterday"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(relabel)

// A running node whose Kubernetes node is relabelled from H100 to A100: the Slurm
// node's label features follow, slurm.conf's own features stay, and the pod keeps
// the marker that makes the next round quiet.
BOOST_AUTO_TEST_CASE(label_features_follow_the_kubernetes_node) {
  auto c = conf::ParseBridgeConfig(std::string(kConf) +
                                       "Feature=h100 Selector=gpu.product=H100\n"
                                       "Feature=a100 Selector=gpu.product=A100\n",
                                   "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  ks::Reconciler r(ks::ReconcileOptions::From(*c));
  auto node = [](const std::string& product) {
    return Parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0","labels":)"
                 R"({"gpu.product":")" +
                 product +
                 R"("}},"spec":{},"status":{"conditions":)"
                 R"([{"type":"Ready","status":"True"}]}})");
  };
  SlurmNode w0 = Up("w-0");
  w0.features = "h100,ib";
  w0.features_act = "h100,ib";
  const Clock::Steady::time_point now{std::chrono::hours(1)};
  const Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};

  // First look: only the marker (Slurm already has what registration reported).
  ks::World w{{w0}, {Pod("w-0", "n-0", "Running")}, {node("H100")}};
  auto actions = r.Plan(w, now, wall);
  const auto* mark = Find(actions, ActionKind::kSetFeatures, "w-0");
  BOOST_REQUIRE(mark);
  BOOST_TEST(!mark->update_slurm);
  BOOST_TEST(mark->label_features == "h100");

  // Marked: quiet.
  ks::World marked{
      {w0},
      {Pod("w-0", "n-0", "Running", R"("annotations":{"k8sbridge.io/label-features":"h100"})")},
      {node("H100")}};
  BOOST_TEST(!Find(r.Plan(marked, now, wall), ActionKind::kSetFeatures, "w-0"));

  // Relabelled: h100 goes, a100 comes, ib stays.
  marked.nodes = {node("A100")};
  actions = r.Plan(marked, now, wall);
  const auto* set = Find(actions, ActionKind::kSetFeatures, "w-0");
  BOOST_REQUIRE(set);
  BOOST_TEST(set->update_slurm);
  BOOST_TEST(set->features == "a100,ib");
  BOOST_TEST(set->features_act == "a100,ib");
  BOOST_TEST(set->label_features == "a100");

  // A powered-down node is left to Slurm's own reset.
  SlurmNode down = PoweredDown("w-0");
  marked.slurm = {down};
  BOOST_TEST(!Find(r.Plan(marked, now, wall), ActionKind::kSetFeatures, "w-0"));
}

// Rollouts (docs/sync.md, "Rollouts"): the fixture's group "gpu" has template hash "new".
struct RolloutFixture : Fixture {
  RolloutFixture() {
    ks::ReconcileOptions o = ks::ReconcileOptions::From(config);
    o.template_hashes["gpu"] = "new";
    r = std::make_unique<ks::Reconciler>(o);
  }
  static kube::Object HashedPod(const std::string& name, const std::string& hash,
                                const std::string& reboot_of = "") {
    std::string annotations = R"("annotations":{"k8sbridge.io/template-hash":")" + hash + "\"";
    if (!reboot_of.empty())
      annotations += R"(,"k8sbridge.io/reboot-of":")" + reboot_of + "\"";
    return Pod(name, "n-0", "Running", annotations + "}");
  }
  static SlurmNode RebootIssued(const std::string& name) {
    SlurmNode n = Up(name);
    n.base = SlurmNode::Base::kDown;
    n.reboot_issued = true;
    n.reason = "reboot issued";
    n.reason_time = 1'800'000'100;
    return n;
  }
};

BOOST_FIXTURE_TEST_CASE(an_old_template_asks_for_a_reboot_asap_only_where_safe, RolloutFixture) {
  SlurmNode busy = Up("w-1");
  busy.base = SlurmNode::Base::kAllocated;
  SlurmNode drained = Drained("w-2", "admin: bad fan");
  SlurmNode pending = Up("w-3");
  pending.reboot_requested = true;
  ks::World w{{Up("w-0"), busy, drained, pending, Up("w-4"), Up("w-5")},
              {HashedPod("w-0", "old"), HashedPod("w-1", "old"), HashedPod("w-2", "old"),
               HashedPod("w-3", "old"), HashedPod("w-4", "new"),
               Pod("w-5", "n-0", "Running")},  // no hash: made before rollouts, left alone
              {Node("n-0")}};
  auto actions = Plan(w);
  // Idle and busy nodes alike: Slurm reboots the busy one once its jobs end.
  BOOST_REQUIRE(Find(actions, ActionKind::kReboot, "w-0"));
  BOOST_REQUIRE(Find(actions, ActionKind::kReboot, "w-1"));
  BOOST_TEST(Find(actions, ActionKind::kReboot, "w-0")->reason ==
             "k8sbridge: rollout: pod template of node group gpu changed");
  // An admin's drain is never lifted by the reboot's nextstate=RESUME; a pending
  // reboot is not asked twice; the current template and an unknown one need none.
  for (const char* node : {"w-2", "w-3", "w-4", "w-5"})
    BOOST_TEST(!Find(actions, ActionKind::kReboot, node), node);
}

BOOST_FIXTURE_TEST_CASE(an_issued_reboot_replaces_the_pod_once, RolloutFixture) {
  ks::World w{{RebootIssued("w-0")}, {HashedPod("w-0", "old")}, {Node("n-0")}};
  auto actions = Plan(w);
  const auto* del = Find(actions, ActionKind::kDeletePod, "w-0");
  BOOST_REQUIRE(del);
  BOOST_TEST(del->uid == "u-w-0");
  BOOST_TEST((del->rule == ks::Rule::kReboot));
  BOOST_TEST(del->reboot_of == "1800000100");
  // DOWN + REBOOT_ISSUED is Slurm's doing, not a failure: no other rule fires.
  BOOST_TEST(actions.size() == 1u, k8sbridge::text::Join(Strings(actions), "; "));
  // Gone: a new pod from the current template, marked with the reboot.
  w.pods.clear();
  actions = Plan(w);
  const auto* recreate = Find(actions, ActionKind::kRecreatePod, "w-0");
  BOOST_REQUIRE(recreate);
  BOOST_TEST(recreate->reboot_of == "1800000100");
  BOOST_TEST(actions.size() == 1u);
  // The new pod is this reboot's: nothing more until its slurmd registers.
  w.pods = {HashedPod("w-0", "new", "1800000100")};
  BOOST_TEST(Plan(w).empty(), k8sbridge::text::Join(Strings(Plan(w)), "; "));
  // A later reboot (an admin's scontrol reboot) replaces even a current pod.
  w.slurm[0].reason_time += 3600;
  BOOST_TEST(Find(Plan(w), ActionKind::kDeletePod, "w-0"));
}

BOOST_AUTO_TEST_CASE(reboot_actions_are_rechecked_on_the_live_node) {
  const Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};
  ks::Action reboot{ActionKind::kReboot, "w-0", "k8sbridge: rollout"};
  BOOST_TEST(ks::NotDueOn(reboot, Up("w-0"), wall).empty());
  BOOST_TEST(!ks::NotDueOn(reboot, Drained("w-0", "admin"), wall).empty());
  BOOST_TEST(!ks::NotDueOn(reboot, PoweredDown("w-0"), wall).empty());
  SlurmNode requested = Up("w-0");
  requested.reboot_requested = true;
  BOOST_TEST(!ks::NotDueOn(reboot, requested, wall).empty());
  ks::Action recreate{ActionKind::kRecreatePod, "w-0", "new pod"};
  recreate.reboot_of = "1800000100";
  SlurmNode issued = RolloutFixture::RebootIssued("w-0");
  BOOST_TEST(ks::NotDueOn(recreate, issued, wall).empty());
  issued.reason_time += 1;  // another reboot than the one planned for
  BOOST_TEST(!ks::NotDueOn(recreate, issued, wall).empty());
  BOOST_TEST(!ks::NotDueOn(recreate, Up("w-0"), wall).empty());  // returned to service
}

BOOST_AUTO_TEST_SUITE_END()

// Slurm 25.05+ (SyncTopology): a running node of an unpinned group is registered
// under the leaf of its pod's Kubernetes node, once; docs/topology.md, "Resumed nodes".
BOOST_AUTO_TEST_SUITE(topology)

constexpr std::string_view kTopologyConf = R"(
ClusterName=hpc1
Namespace=slurm
PlacementLabel=network.topology.nvidia.com/leaf
NodeGroup=any Nodes=w-[0-3] PodTemplate=/t.yaml
NodeGroup=leaf0 Nodes=w-[4-7] PodTemplate=/t.yaml PlacementDomain=leaf-0
SyncTopology=fabric
)";

struct TopologyFixture {
  conf::BridgeConfig config;
  Clock::Steady::time_point now{std::chrono::hours(1)};
  Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};

  explicit TopologyFixture(std::string_view text = kTopologyConf) {
    auto c =
        conf::ParseBridgeConfig(text, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    config = std::move(*c);
  }
  static kube::Object LeafNode(const std::string& name, const std::string& leaf) {
    return Parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
                 R"(","labels":{"network.topology.nvidia.com/leaf":")" + leaf +
                 R"("}},"spec":{},"status":{"conditions":[{"type":"Ready","status":"True"}]}})");
  }
  std::vector<ks::Action> Plan(const ks::World& w) {
    ks::Reconciler r(ks::ReconcileOptions::From(config));
    return r.Plan(w, now, wall);
  }
};

BOOST_FIXTURE_TEST_CASE(a_running_node_gets_its_pods_leaf_only_when_it_changed, TopologyFixture) {
  ks::World w{{Up("w-0")}, {Pod("w-0", "n-1", "Running")}, {LeafNode("n-1", "leaf-1")}};
  auto actions = Plan(w);
  const ks::Action* set = Find(actions, ActionKind::kSetTopology, "w-0");
  BOOST_REQUIRE(set);
  BOOST_TEST(set->topology == "fabric:k8s1-leaf-1");

  // Slurm holds that unit: never sent again (topology/block would drop the node).
  w.slurm[0].topology = "fabric:k8s1-leaf-1";
  BOOST_TEST(!Find(Plan(w), ActionKind::kSetTopology, "w-0"));
  w.slurm[0].topology = "blocks:b1,fabric:k8s1-leaf-1";
  BOOST_TEST(!Find(Plan(w), ActionKind::kSetTopology, "w-0"));

  // The next resume's pod landed under another leaf.
  w.nodes = {LeafNode("n-1", "leaf-0")};
  actions = Plan(w);
  set = Find(actions, ActionKind::kSetTopology, "w-0");
  BOOST_REQUIRE(set);
  BOOST_TEST(set->topology == "fabric:k8s1-leaf-0");
}

BOOST_FIXTURE_TEST_CASE(pinned_unplaced_and_suspended_nodes_get_no_update, TopologyFixture) {
  SlurmNode powering_up = Up("w-1");
  powering_up.powering_up = true;
  SlurmNode suspending = Up("w-2");
  suspending.power_down = true;
  ks::World w{
      {Up("w-4"), powering_up, suspending, Up("w-3"), Up("w-0")},
      {Pod("w-4", "n-1", "Running"), Pod("w-1", "n-1", "Running"), Pod("w-2", "n-1", "Running"),
       Pod("w-3", "n-2", "Running"), Pod("w-0", "n-1", "Pending")},
      {LeafNode("n-1", "leaf-0"), Node("n-2")}};
  // w-4: its group is pinned, the file has its leaf; w-3: its Kubernetes node has no
  // leaf label; w-0: its pod does not run yet.
  for (const ks::Action& a : Plan(w))
    BOOST_TEST((a.kind != ActionKind::kSetTopology), a.ToString());
}

BOOST_AUTO_TEST_CASE(without_sync_topology_or_on_slurm_24_11_nothing_is_registered) {
  TopologyFixture off(std::string(kTopologyConf)
                          .replace(kTopologyConf.find("SyncTopology"),
                                   std::string("SyncTopology=fabric").size(), ""));
  ks::World w{{Up("w-0")}, {Pod("w-0", "n-1", "Running")}, {off.LeafNode("n-1", "leaf-1")}};
  BOOST_TEST(!Find(off.Plan(w), ActionKind::kSetTopology, "w-0"));

  TopologyFixture on;
  k8sbridge::slurm::RecordingSlurm slurm_24_11;
  slurm_24_11.SetTopologyUpdates(false);
  k8sbridge::RecordingLogger log;
  ks::Reconciler r(ks::ReconcileOptions::For(on.config, nullptr, slurm_24_11, log));
  BOOST_TEST(!Find(r.Plan(w, on.now, on.wall), ActionKind::kSetTopology, "w-0"));
  BOOST_TEST(log.Contains("SyncTopology=fabric ignored"));
  BOOST_TEST(!log.Contains("SyncTopology", k8sbridge::LogLevel::kInfo));  // debug only

  k8sbridge::slurm::RecordingSlurm slurm_26_05;
  ks::Reconciler r26(ks::ReconcileOptions::For(on.config, nullptr, slurm_26_05, log));
  BOOST_TEST(Find(r26.Plan(w, on.now, on.wall), ActionKind::kSetTopology, "w-0"));
}

BOOST_AUTO_TEST_SUITE_END()
