// The Executor against an in-memory API (a FakeTransport fallback keeping nodes and
// pods by path) and slurm::RecordingSlurm; and the whole loop (plan, execute,
// read back) including a restart with a fresh Reconciler.
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/test/unit_test.hpp>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/sync/executor.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace kube = k8sbridge::kube;
namespace ks = k8sbridge::sync;
using ks::ActionKind;
using kube::FakeTransport;
using namespace std::chrono_literals;

namespace {

std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return b.GetString();
}

// RFC 7386 merge patch.
void MergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                rapidjson::Document::AllocatorType& a) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, a);
    return;
  }
  if (!target.IsObject())
    target.SetObject();
  for (auto& m : patch.GetObject()) {
    if (m.value.IsNull()) {
      target.RemoveMember(m.name);
    } else if (target.HasMember(m.name)) {
      MergePatch(target[m.name], m.value, a);
    } else {
      rapidjson::Value v;
      v.SetObject();
      MergePatch(v, m.value, a);
      target.AddMember(rapidjson::Value(m.name, a), v, a);
    }
  }
}

class FakeApi {
 public:
  void Put(const std::string& path, const std::string& json) {
    std::lock_guard lock(mu_);
    objects_[path] = json;
  }
  bool Has(const std::string& path) const {
    std::lock_guard lock(mu_);
    return objects_.count(path) != 0;
  }
  kube::Object Get(const std::string& path) const {
    std::lock_guard lock(mu_);
    return *kube::Object::Parse(objects_.at(path));
  }
  void Erase(const std::string& path) {
    std::lock_guard lock(mu_);
    objects_.erase(path);
  }
  // Every GET answers 500 (the API server failing).
  void FailGets(bool fail) {
    std::lock_guard lock(mu_);
    fail_gets_ = fail;
  }
  int events() const { return events_; }
  int writes() const { return writes_; }

  FakeTransport::Answer Serve(const FakeTransport::Recorded& r) {
    std::lock_guard lock(mu_);
    std::string path = r.url.substr(r.url.find('/', 8));
    path = path.substr(0, path.find('?'));
    if (path.find("/events") != std::string::npos) {
      ++events_;
      return FakeTransport::Json(201, r.body);
    }
    if (fail_gets_ && r.method == "GET")
      return FakeTransport::Json(500, R"({"kind":"Status","code":500,"reason":"InternalError"})");
    auto it = objects_.find(path);
    if (it == objects_.end() && r.method == "GET" && path.ends_with("/pods"))
      return FakeTransport::Json(200, ListLocked(path, r.url));
    if (it == objects_.end())
      return FakeTransport::Json(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    rapidjson::Document doc;
    doc.Parse(it->second.c_str());
    if (r.method == "GET")
      return FakeTransport::Json(200, it->second);
    if (r.method == "DELETE") {
      ++writes_;
      objects_.erase(it);
      return FakeTransport::Json(200, ToJson(doc));
    }
    ++writes_;
    rapidjson::Document body;
    body.Parse(r.body.c_str());
    if (r.method == "PUT") {
      if (std::string(body["metadata"]["resourceVersion"].GetString()) !=
          doc["metadata"]["resourceVersion"].GetString())
        return FakeTransport::Json(409, R"({"kind":"Status","code":409,"reason":"Conflict"})");
      doc.CopyFrom(body, doc.GetAllocator());
    } else if (r.method == "PATCH") {
      MergePatch(doc, body, doc.GetAllocator());
    }
    doc["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), doc.GetAllocator());
    it->second = ToJson(doc);
    return FakeTransport::Json(200, it->second);
  }

 private:
  // A list of the objects under `path`, with the url's labelSelector (k=v terms).
  std::string ListLocked(const std::string& path, const std::string& url) const {
    std::string selector;
    if (size_t at = url.find("labelSelector="); at != std::string::npos) {
      std::string raw = url.substr(at + 14);
      raw = raw.substr(0, raw.find('&'));
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '%' && i + 2 < raw.size()) {
          selector += static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          selector += raw[i];
        }
      }
    }
    std::string items;
    for (const auto& [key, json] : objects_) {
      if (!key.starts_with(path + "/") || key.find('/', path.size() + 1) != std::string::npos)
        continue;
      kube::Object o = *kube::Object::Parse(json);
      bool match = true;
      size_t start = 0;
      while (match && start < selector.size()) {
        size_t comma = selector.find(',', start);
        std::string term =
            selector.substr(start, comma == std::string::npos ? comma : comma - start);
        start = comma == std::string::npos ? selector.size() : comma + 1;
        const size_t eq = term.find('=');
        auto labels = o.Labels();
        auto l = labels.find(term.substr(0, eq));
        match = l != labels.end() && l->second == term.substr(eq + 1);
      }
      if (match)
        items += (items.empty() ? "" : ",") + json;
    }
    return R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[)" +
           items + "]}";
  }

  mutable std::mutex mu_;
  std::map<std::string, std::string> objects_;
  int events_ = 0, writes_ = 0, rv_ = 100;
  bool fail_gets_ = false;
};

constexpr char kNodePath[] = "/api/v1/nodes/n-0";
constexpr char kPodPath[] = "/api/v1/namespaces/slurm/pods/w-0";

std::string PodJson(const std::string& cluster = "hpc1") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"w-0","namespace":"slurm",)"
         R"("uid":"u-w-0","resourceVersion":"1","labels":{"app.kubernetes.io/managed-by":"k8sbridge",)"
         R"("k8sbridge.io/cluster":")" +
         cluster +
         R"(","k8sbridge.io/node":"w-0"}},"spec":{"nodeName":"n-0"},)"
         R"("status":{"phase":"Running"}})";
}

struct Fixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  std::unique_ptr<kube::Client> client;
  FakeApi api;
  k8sbridge::slurm::RecordingSlurm slurm;
  std::unique_ptr<kube::EventRecorder> events;
  std::unique_ptr<ks::Executor> exec;

  Fixture() {
    client = kube::testing::NoRetryClient(transport, clock, log, "t0");
    transport->SetFallback([this](const FakeTransport::Recorded& r) { return api.Serve(r); });
    kube::EventRecorderOptions eo;
    eo.start_thread = false;
    events = std::make_unique<kube::EventRecorder>(*client, eo);
    exec = std::make_unique<ks::Executor>(*client, slurm, events.get(), log,
                                          ks::ExecutorOptions{"hpc1", "slurm"});
    api.Put(kNodePath,
            R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0","resourceVersion":"1"},)"
            R"("spec":{},"status":{"conditions":[{"type":"Ready","status":"True"}]}})");
    api.Put(kPodPath, PodJson());
  }

  ks::World World() {
    return ks::World{*slurm.LoadNodes(),
                     {api.Has(kPodPath) ? api.Get(kPodPath) : kube::Object()},
                     {api.Get(kNodePath)}};
  }
  void MarkPodFailed() {
    kube::Object pod = api.Get(kPodPath);
    pod.SetString("/status/phase", "Failed");
    api.Put(kPodPath, pod.ToJson());
  }
  // Plans and executes until nothing is left to do; returns the rounds that acted.
  int Converge(ks::Reconciler& r) {
    int rounds = 0;
    for (int i = 0; i < 10; ++i) {
      auto actions = r.Plan(World(), clock.Now(), clock.WallNow());
      if (actions.empty())
        return rounds;
      for (const auto& a : actions)
        BOOST_TEST(exec->Execute(a).ok(), a.ToString());
      ++rounds;
      clock.Advance(10s);  // beyond the repeat window
    }
    BOOST_FAIL("did not converge");
    return rounds;
  }
};

ks::SlurmNode Up(const std::string& name) {
  ks::SlurmNode n;
  n.name = name;
  n.base = ks::SlurmNode::Base::kIdle;
  n.cloud = true;
  return n;
}

ks::SlurmNode Drained(const std::string& name, const std::string& reason) {
  ks::SlurmNode n = Up(name);
  n.drain = true;
  n.reason = reason;
  n.reason_user = "root";
  return n;
}

const k8sbridge::conf::BridgeConfig& Config() {
  static const auto* config = new k8sbridge::conf::BridgeConfig(*k8sbridge::conf::ParseBridgeConfig(
      "ClusterName=hpc1\nNamespace=slurm\nNodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml\n",
      "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists()));
  return *config;
}

ks::ReconcileOptions Options() {
  return ks::ReconcileOptions::From(Config());
}

bool HasTaint(const kube::Object& node) {
  return node.json()["spec"].HasMember("taints") && node.json()["spec"]["taints"].Size() > 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(executor)

BOOST_FIXTURE_TEST_CASE(hardware_drain_round_trip_and_restart_repeat_nothing, Fixture) {
  slurm.SetNodes({Drained("w-0", "[hardware] xid 79")});
  ks::Reconciler r(Options());
  BOOST_TEST(Converge(r) == 1);
  kube::Object node = api.Get(kNodePath);
  BOOST_TEST(kube::node::Unschedulable(node));
  BOOST_TEST(HasTaint(node));
  BOOST_TEST(node.Annotations()["k8sbridge.io/cordoned-by"] == "hpc1");
  BOOST_TEST(node.Annotations()["k8sbridge.io/hardware-drains"] == "w-0");
  BOOST_TEST(api.Get(kPodPath).Annotations()["k8sbridge.io/slurm-drain-reason"] ==
             "[hardware] xid 79");
  BOOST_TEST(events->ProcessPending() == 2u);

  // A restarted daemon (a fresh Reconciler and Executor) finds nothing to do.
  const int writes = api.writes();
  ks::Reconciler restarted(Options());
  BOOST_TEST(Converge(restarted) == 0);
  BOOST_TEST(api.writes() == writes);

  // Resume: everything we set goes, nothing else.
  slurm.Find("w-0")->drain = false;
  slurm.Find("w-0")->reason.clear();
  BOOST_TEST(Converge(r) == 1);
  node = api.Get(kNodePath);
  BOOST_TEST(!kube::node::Unschedulable(node));
  BOOST_TEST(!HasTaint(node));
  BOOST_TEST(node.Annotations().count("k8sbridge.io/cordoned-by") == 0u);
  BOOST_TEST(api.Get(kPodPath).Annotations().count("k8sbridge.io/slurm-drain-reason") == 0u);
  BOOST_TEST(slurm.calls().empty());  // Slurm untouched throughout
}

BOOST_FIXTURE_TEST_CASE(a_cordon_by_someone_else_survives_the_undo, Fixture) {
  {
    kube::Object node = api.Get(kNodePath);
    node.SetBool("/spec/unschedulable", true);
    api.Put(kNodePath, node.ToJson());
  }
  ks::SlurmNode n = Up("w-0");
  n.drain = true;
  n.reason = "[hardware] xid 79";
  slurm.SetNodes({n});
  ks::Reconciler r(Options());
  Converge(r);
  BOOST_TEST(HasTaint(api.Get(kNodePath)));
  BOOST_TEST(api.Get(kNodePath).Annotations().count("k8sbridge.io/cordoned-by") == 0u);
  slurm.Find("w-0")->drain = false;
  slurm.Find("w-0")->reason.clear();
  Converge(r);
  kube::Object node = api.Get(kNodePath);
  BOOST_TEST(!HasTaint(node));
  BOOST_TEST(kube::node::Unschedulable(node));  // not ours to lift
  // ... and the foreign cordon drained w-0 with our reason, which stays while it lasts.
  BOOST_TEST(slurm.Find("w-0")->reason == "k8sbridge: Kubernetes node n-0 cordoned");
}

BOOST_FIXTURE_TEST_CASE(delete_checks_ownership_on_the_live_object, Fixture) {
  api.Put(kPodPath, PodJson("other"));
  ks::Action a{ActionKind::kDeletePod, "w-0", "orphan"};
  a.uid = "u-w-0";
  BOOST_TEST((exec->Execute(a).code() == k8sbridge::Status::Code::kPermissionDenied));
  BOOST_TEST(api.Has(kPodPath));
  api.Put(kPodPath, PodJson());
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(!api.Has(kPodPath));
  // Gone already: fine.
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
}

BOOST_FIXTURE_TEST_CASE(repeats_inside_the_window_are_skipped, Fixture) {
  slurm.SetNodes({Up("w-0")});
  ks::Action a{ActionKind::kDrain, "w-0", "k8sbridge: x"};
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 1u);
  clock.Advance(6s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 2u);
}

// A node whose pod failed: DOWN once; then (Slurm) POWERED_DOWN and the pod gone:
// the node is returned to service (IDLE+POWERED_DOWN), so the next job gets a
// fresh pod.
BOOST_FIXTURE_TEST_CASE(failed_pod_downs_the_node_once, Fixture) {
  MarkPodFailed();
  slurm.SetNodes({Up("w-0")});
  ks::Reconciler r(Options());
  Converge(r);
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"fail w-0 k8sbridge: pod w-0 failed"});
  // Slurm powers it down (SuspendProgram deletes the pod): down~, for good in 24.11.
  ks::SlurmNode* n = slurm.Find("w-0");
  n->power_down = false;
  n->powered_down = true;
  // While the pod is still there (terminating), the node stays as it is.
  BOOST_TEST(Converge(r) == 0);
  BOOST_TEST(slurm.calls().size() == 1u);
  api.Erase(kPodPath);
  BOOST_TEST(Converge(r) == 1);
  BOOST_TEST(slurm.calls().back() == "return w-0");
  BOOST_TEST(!n->Down());
  BOOST_TEST(n->powered_down);
  BOOST_TEST(Converge(r) == 0);  // steady
}

// The resume needs the API server's word that no pod of ours exists: a cache that
// has not seen the pod yet, or an API error, does nothing.
BOOST_FIXTURE_TEST_CASE(resume_confirms_no_pod_live_and_fails_closed, Fixture) {
  ks::SlurmNode n = Up("w-0");
  n.base = ks::SlurmNode::Base::kDown;
  n.powered_down = true;
  n.reason = "k8sbridge: pod w-0 deleted";
  slurm.SetNodes({n});
  ks::Action a{ActionKind::kResume, "w-0", "back to service"};
  BOOST_TEST(exec->Execute(a).ok());  // the live pod exists: not done
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(log.Contains("not done: a pod of ours still exists"));
  api.Erase(kPodPath);
  api.FailGets(true);
  clock.Advance(10s);
  BOOST_TEST(!exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().empty());
  api.FailGets(false);
  // Slurm (live) says someone resumed it meanwhile: nothing to do.
  slurm.Find("w-0")->base = ks::SlurmNode::Base::kIdle;
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().empty());
  slurm.Find("w-0")->base = ks::SlurmNode::Base::kDown;
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"return w-0"});
}

// The return is IDLE, not RESUME (which would leave the node NOT_RESPONDING); an
// idle, powered-down node left NOT_RESPONDING (an admin's RESUME) is powered down
// again, after a live read shows it still is.
BOOST_FIXTURE_TEST_CASE(a_not_responding_powered_down_node_is_powered_down_again, Fixture) {
  ks::SlurmNode n = Up("w-0");
  n.powered_down = true;
  n.not_responding = true;
  slurm.SetNodes({n});
  api.Erase(kPodPath);
  ks::Reconciler r(Options());
  BOOST_TEST(Converge(r) == 1);
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"power_down w-0"});
  BOOST_TEST(!slurm.Find("w-0")->not_responding);
  // Slurm's power-down ends: POWERED_DOWN, no longer asked to: nothing more to do.
  slurm.Find("w-0")->power_down = false;
  BOOST_TEST(Converge(r) == 0);
  // A plan from an old snapshot, read live after Slurm resumed the node: not done.
  ks::Action a{ActionKind::kRenewPowerDown, "w-0", "stale"};
  slurm.Find("w-0")->not_responding = true;
  slurm.Find("w-0")->powered_down = false;
  slurm.Find("w-0")->powering_up = true;
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 1u);
}

// The snapshot the plan came from said up; slurmctld, read live, says a suspend
// is under way: a pod deleted by SuspendProgram is not a failure.
BOOST_FIXTURE_TEST_CASE(fail_rechecks_the_node_live_and_spares_a_suspend, Fixture) {
  ks::Action a{ActionKind::kFail, "w-0", "k8sbridge: pod w-0 deleted"};
  a.uid = "u-w-0";
  a.rule = ks::Rule::kPodFailed;
  for (int flag = 0; flag < 3; ++flag) {
    ks::SlurmNode live = Up("w-0");
    (flag == 0 ? live.power_down : flag == 1 ? live.powering_down : live.powered_down) = true;
    slurm.SetNodes({live});
    BOOST_TEST(exec->Execute(a).ok());
    BOOST_TEST(slurm.calls().empty(), flag);
    clock.Advance(10s);
  }
  slurm.SetNodes({Up("w-0")});
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"fail w-0 k8sbridge: pod w-0 deleted"});
  // Slurm cannot be read live: nothing is done.
  slurm.FailLoads(true);
  clock.Advance(10s);
  BOOST_TEST(!exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 1u);
}

// An admin drained the node; then its pod fails. The node goes DOWN (its jobs
// requeue) but keeps the admin's reason and author, and once powered down it is
// never returned to service by k8sbridge.
BOOST_FIXTURE_TEST_CASE(admin_drained_node_whose_pod_fails_keeps_the_admins_reason, Fixture) {
  slurm.SetNodes({Drained("w-0", "admin: bad fan")});
  MarkPodFailed();
  ks::Reconciler r(Options());
  Converge(r);
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"fail w-0"});  // no reason sent
  ks::SlurmNode* live = slurm.Find("w-0");
  BOOST_TEST(live->Down());
  BOOST_TEST(live->reason == "admin: bad fan");
  BOOST_TEST(live->reason_user == "root");
  // Powered down, pod gone: still the admin's.
  live->power_down = false;
  live->powered_down = true;
  api.Erase(kPodPath);
  BOOST_TEST(Converge(r) == 0);
  BOOST_TEST(slurm.calls().size() == 1u);
  BOOST_TEST(live->reason == "admin: bad fan");
}

// A drain planned from a snapshot is not sent to a node that, read live, is out
// of service with someone else's reason (or drained already).
BOOST_FIXTURE_TEST_CASE(drain_never_overwrites_a_foreign_reason, Fixture) {
  ks::Action a{ActionKind::kDrain, "w-0", "k8sbridge: Kubernetes node n-0 cordoned"};
  a.rule = ks::Rule::kNodeTrouble;
  ks::SlurmNode down = Up("w-0");
  down.base = ks::SlurmNode::Base::kDown;
  down.reason = "admin: rewiring";
  slurm.SetNodes({down});
  BOOST_TEST(exec->Execute(a).ok());
  ks::SlurmNode drained = Up("w-0");
  drained.drain = true;
  drained.reason = "admin: bad fan";
  slurm.SetNodes({drained});
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(slurm.Find("w-0")->reason == "admin: bad fan");
  slurm.SetNodes({Up("w-0")});
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 1u);
}

// "Pod lost" and "no pod while POWERING_UP" come from the informer's cache: the
// API server must confirm there is no pod (404); an error does nothing.
BOOST_FIXTURE_TEST_CASE(lost_and_start_rules_confirm_the_pod_is_gone_live, Fixture) {
  for (ks::Rule rule : {ks::Rule::kPodLost, ks::Rule::kNoPodStarting}) {
    const size_t before = slurm.calls().size();
    ks::SlurmNode n = Up("w-0");
    n.powering_up = rule == ks::Rule::kNoPodStarting;
    slurm.SetNodes({n});
    api.Put(kPodPath, PodJson());
    ks::Action a{ActionKind::kFail, "w-0", "k8sbridge: no pod"};
    a.rule = rule;
    BOOST_TEST(exec->Execute(a).ok());  // the pod is there, the cache was behind
    BOOST_TEST(slurm.calls().size() == before);
    api.Erase(kPodPath);
    api.FailGets(true);
    clock.Advance(10s);
    BOOST_TEST(!exec->Execute(a).ok());
    BOOST_TEST(slurm.calls().size() == before);
    api.FailGets(false);
    BOOST_TEST(exec->Execute(a).ok());
    BOOST_REQUIRE(slurm.calls().size() == before + 1);
    BOOST_TEST(slurm.calls().back() == "fail w-0 k8sbridge: no pod");
    clock.Advance(10s);
  }
}

// A lost Kubernetes node (Ready Unknown) is read again live before the DOWN: back
// (Ready) does nothing, gone (404) or still lost fails the node, an error does nothing.
BOOST_FIXTURE_TEST_CASE(lost_node_fail_rechecks_the_kubernetes_node_live, Fixture) {
  const std::string lost =
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0","resourceVersion":"2"},)"
      R"("spec":{},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}})";
  ks::Action a{ActionKind::kFail, "w-0", "k8sbridge: Kubernetes node n-0 lost: Ready Unknown"};
  a.rule = ks::Rule::kNodeLost;
  a.k8s_node = "n-0";
  a.uid = "u-w-0";
  BOOST_TEST(exec->Execute(a).ok());  // live: Ready again
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(log.Contains("not done: Kubernetes node n-0 is back (read live)"));
  api.FailGets(true);
  clock.Advance(10s);
  BOOST_TEST(!exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().empty());
  api.FailGets(false);
  api.Put(kNodePath, lost);
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls() == std::vector<std::string>{
                                  "fail w-0 k8sbridge: Kubernetes node n-0 lost: Ready Unknown"});
  // Gone: as lost.
  api.Erase(kNodePath);
  slurm.SetNodes({Up("w-0")});
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls().size() == 2u);
}

// The resume's live look for a pod of ours lists the node's pods by label: a pod
// stranded on a lost node (being deleted there) counts as none; one being deleted on
// a Ready node, or a replacement under another name, holds the resume back.
BOOST_FIXTURE_TEST_CASE(resume_ignores_a_pod_stranded_on_a_lost_node, Fixture) {
  ks::SlurmNode n = Up("w-0");
  n.base = ks::SlurmNode::Base::kDown;
  n.powered_down = true;
  n.reason = "k8sbridge: Kubernetes node n-0 lost: Ready Unknown";
  slurm.SetNodes({n});
  kube::Object pod = api.Get(kPodPath);
  pod.SetString("/metadata/deletionTimestamp", "2027-01-15T08:00:00Z");
  api.Put(kPodPath, pod.ToJson());
  ks::Action a{ActionKind::kResume, "w-0", "back to service"};
  BOOST_TEST(exec->Execute(a).ok());  // n-0 is Ready: the pod will go, wait
  BOOST_TEST(slurm.calls().empty());
  api.Put(kNodePath,
          R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0","resourceVersion":"2"},)"
          R"("spec":{},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}})");
  std::string replacement = PodJson();
  replacement.replace(replacement.find(R"("name":"w-0")"), 12, R"("name":"w-0.1")");
  replacement.replace(replacement.find(R"("uid":"u-w-0")"), 13, R"("uid":"u-w-0.1")");
  api.Put("/api/v1/namespaces/slurm/pods/w-0.1", replacement);
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());  // the replacement is a pod of ours
  BOOST_TEST(slurm.calls().empty());
  api.Erase("/api/v1/namespaces/slurm/pods/w-0.1");
  clock.Advance(10s);
  BOOST_TEST(exec->Execute(a).ok());
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"return w-0"});
}

// Leadership is asked before every action: lost mid-pass, the rest is not done.
BOOST_FIXTURE_TEST_CASE(leadership_is_checked_before_every_action, Fixture) {
  int asked = 0;
  ks::ExecutorOptions o{"hpc1", "slurm"};
  o.leading = [&]() { return ++asked <= 1; };
  ks::Executor leader(*client, slurm, nullptr, log, o);
  slurm.SetNodes({Up("w-0"), Up("w-1")});
  std::vector<ks::Action> pass{{ActionKind::kUndrain, "w-0"}, {ActionKind::kUndrain, "w-1"}};
  ks::PassResult r = leader.ExecutePass(pass, 20);
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"undrain w-0"});
  BOOST_TEST(r.skipped == "not_leader");
  BOOST_TEST(r.done == 1);
  BOOST_TEST(leader.Execute(pass[1]).code() == k8sbridge::Status::Code::kCancelled);
}

// More destructive actions than the cap in one pass (Slurm suddenly lists no node:
// every pod an orphan): none of them is done, the harmless ones are, and the pass
// says why.
BOOST_FIXTURE_TEST_CASE(mass_action_guard_does_none_above_the_cap, Fixture) {
  std::vector<ks::Action> pass;
  for (int i = 0; i < 21; ++i)
    pass.emplace_back(ActionKind::kDeletePod, "w-0", fmt::format("orphan {}", i));
  pass.emplace_back(ActionKind::kUndrain, "w-0");
  slurm.SetNodes({Up("w-0")});
  std::vector<std::string> results;
  ks::PassResult r = exec->ExecutePass(pass, 20, [&](const ks::Action& a, std::string_view res) {
    results.push_back(fmt::format("{} {}", ks::ActionKindName(a.kind), res));
  });
  BOOST_TEST(r.skipped == "mass_action");
  BOOST_TEST(r.why.find("21 destructive actions") != std::string::npos, r.why);
  BOOST_TEST(api.Has(kPodPath));
  BOOST_TEST(results == std::vector<std::string>{"undrain ok"});
  // At the cap: done.
  pass.erase(pass.begin());
  r = exec->ExecutePass(pass, 20);
  BOOST_TEST(r.skipped.empty());
  BOOST_TEST(!api.Has(kPodPath));
  BOOST_TEST(ks::MaxDestructive(0, 10) == 20u);
  BOOST_TEST(ks::MaxDestructive(0, 1000) == 100u);
  BOOST_TEST(ks::MaxDestructive(5, 1000) == 5u);
}

// SyncTopology: the update goes once; a stale plan of it again is not due on the
// live read (Slurm holds the unit), so Slurm never gets an unchanged unit twice.
BOOST_FIXTURE_TEST_CASE(a_topology_update_is_sent_once, Fixture) {
  auto config = k8sbridge::conf::ParseBridgeConfig(
      "ClusterName=hpc1\nNamespace=slurm\nPlacementLabel=network.topology.nvidia.com/leaf\n"
      "NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml\nSyncTopology=default\n",
      "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  api.Put(kNodePath,
          R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n-0","resourceVersion":"1",)"
          R"("labels":{"network.topology.nvidia.com/leaf":"leaf-1"}},)"
          R"("spec":{},"status":{"conditions":[{"type":"Ready","status":"True"}]}})");
  slurm.SetNodes({Up("w-0")});
  ks::Reconciler r(ks::ReconcileOptions::For(*config, nullptr, slurm, log));
  const auto stale = r.Plan(World(), clock.Now(), clock.WallNow());
  BOOST_TEST(Converge(r) == 1);
  BOOST_TEST(slurm.calls() == std::vector<std::string>{"topology w-0 default:k8s1-leaf-1"});
  for (const auto& a : stale)
    BOOST_TEST(exec->Execute(a).ok(), a.ToString());
  BOOST_TEST(slurm.calls().size() == 1u);
  BOOST_TEST(Converge(r) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
