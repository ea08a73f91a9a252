// power::Resume / Suspend / ResumeFail against an in-memory API server (a
// FakeTransport fallback that keeps pods by name and can be told to fail chosen
// requests) and slurm::RecordingSlurm. Concurrency is on, so the fake answers by
// request, not in order.
#include <deque>
#include <map>
#include <mutex>

#include <boost/test/unit_test.hpp>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/power/worker_pod.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace conf = k8sbridge::conf;
namespace container = k8sbridge::container;
namespace kube = k8sbridge::kube;
namespace power = k8sbridge::power;
using k8sbridge::LogLevel;
using kube::FakeTransport;

namespace {

constexpr std::string_view kConf = R"(
ClusterName=hpc1
Namespace=slurm
Concurrency=4
RetryDeadline=10s
NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml
Feature=h100 Selector=nvidia.com/gpu.product=H100
)";

constexpr std::string_view kTemplate = R"(
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: slurmd
    image: registry.example/slurm-worker:24.11
)";

std::string StatusJson(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","code":)" + std::to_string(code) + "}";
}

// Just enough of the pods API: create (409 on a taken name), get, delete (by
// precondition uid), events create. Deleting a pod removes it at once.
class FakeApi {
 public:
  struct Fault {
    int status;
    std::string body;
    std::map<std::string, std::string> headers;
  };

  // The next request `method` on pod `name` (POST: the created pod's name) gets `fault`.
  void FailNext(const std::string& method, const std::string& name, Fault fault) {
    std::lock_guard lock(mu_);
    faults_[{method, name}].push_back(std::move(fault));
  }
  void Put(const std::string& name, const std::string& json) {
    std::lock_guard lock(mu_);
    pods_[name] = json;
  }
  // A terminating pod: gone after `gets` more GETs of it (its kubelet finishing).
  void GoneAfterGets(const std::string& name, int gets) {
    std::lock_guard lock(mu_);
    gone_after_gets_[name] = gets;
  }
  // A Kubernetes node that GET /api/v1/nodes/<name> answers (absent: 404).
  void PutNode(const std::string& name, const std::string& json) {
    std::lock_guard lock(mu_);
    node_objects_[name] = json;
  }
  // The Kubernetes nodes a list of /api/v1/nodes returns (a JSON array); none: 404.
  void SetNodes(std::string json_array) {
    std::lock_guard lock(mu_);
    nodes_ = std::move(json_array);
  }
  bool Has(const std::string& name) const {
    std::lock_guard lock(mu_);
    return pods_.count(name) != 0;
  }
  kube::Object Pod(const std::string& name) const {
    std::lock_guard lock(mu_);
    return *kube::Object::Parse(pods_.at(name));
  }
  size_t PodCount() const {
    std::lock_guard lock(mu_);
    return pods_.size();
  }

  FakeTransport::Answer Serve(const FakeTransport::Recorded& r) {
    std::lock_guard lock(mu_);
    const std::string prefix = "https://k8s.test:6443";
    std::string path = r.url.substr(prefix.size());
    if (auto q = path.find('?'); q != std::string::npos)
      path.resize(q);
    if (path == "/api/v1/nodes" && r.method == "GET" && !nodes_.empty()) {
      return FakeTransport::Json(
          200, R"({"kind":"NodeList","metadata":{"resourceVersion":"9"},"items":)" + nodes_ + "}");
    }
    if (path.rfind("/api/v1/nodes/", 0) == 0 && r.method == "GET") {
      auto n = node_objects_.find(path.substr(14));
      if (n == node_objects_.end())
        return FakeTransport::Json(404, StatusJson(404, "NotFound", "nodes not found"));
      return FakeTransport::Json(200, n->second);
    }
    if (path == "/apis/events.k8s.io/v1/namespaces/slurm/events" && r.method == "POST") {
      events_.push_back(r.body);
      return FakeTransport::Json(201, r.body);
    }
    const std::string pods = "/api/v1/namespaces/slurm/pods";
    if (path.rfind(pods, 0) != 0)
      return FakeTransport::Json(404, StatusJson(404, "NotFound", "no such path " + path));
    std::string name = path.size() > pods.size() ? path.substr(pods.size() + 1) : "";
    if (r.method == "POST")
      name = kube::Object::Parse(r.body)->Name();
    if (auto f = faults_.find({r.method, name}); f != faults_.end() && !f->second.empty()) {
      Fault fault = f->second.front();
      f->second.pop_front();
      return FakeTransport::Json(fault.status, fault.body, fault.headers);
    }
    if (r.method == "POST") {
      if (pods_.count(name)) {
        return FakeTransport::Json(
            409, StatusJson(409, "AlreadyExists", "pods \\\"" + name + "\\\" already exists"));
      }
      auto pod = *kube::Object::Parse(r.body);
      pod.SetString("/metadata/uid", "uid-" + name + "-" + std::to_string(++uid_));
      pod.SetString("/status/phase", "Pending");
      pods_[name] = pod.ToJson();
      return FakeTransport::Json(201, pods_[name]);
    }
    if (r.method == "GET" && (name.empty() || name[0] == '?')) {
      // A list of our pods (the selector Suspend sends).
      std::string items;
      for (const auto& [pod_name, json] : pods_) {
        if (kube::Object::Parse(json)->Labels().count("app.kubernetes.io/managed-by"))
          items += (items.empty() ? "" : ",") + json;
      }
      ++lists_;
      return FakeTransport::Json(
          200, R"({"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[)" + items + "]}");
    }
    auto it = pods_.find(name);
    if (it == pods_.end()) {
      return FakeTransport::Json(
          404, StatusJson(404, "NotFound", "pods \\\"" + name + "\\\" not found"));
    }
    if (r.method == "GET") {
      std::string body = it->second;
      if (auto g = gone_after_gets_.find(name); g != gone_after_gets_.end() && --g->second <= 0) {
        gone_after_gets_.erase(g);
        pods_.erase(it);
      }
      return FakeTransport::Json(200, body);
    }
    if (r.method == "DELETE") {
      std::string body = it->second;
      pods_.erase(it);
      return FakeTransport::Json(200, body);
    }
    return FakeTransport::Json(405, StatusJson(405, "MethodNotAllowed", r.method));
  }

  std::vector<std::string> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> pods_;
  std::map<std::pair<std::string, std::string>, std::deque<Fault>> faults_;
  std::vector<std::string> events_;
  std::map<std::string, int> gone_after_gets_;
  std::map<std::string, std::string> node_objects_;
  std::string nodes_;
  int uid_ = 0;

 public:
  int lists_ = 0;
};

// A pod as a k8sbridge resume left it, in `phase`; `owned` = ownership labels.
std::string LeftoverPod(const std::string& name, const std::string& phase, bool owned,
                        bool terminating = false) {
  std::string labels = owned ? R"("app.kubernetes.io/managed-by":"k8sbridge",)"
                               R"("k8sbridge.io/cluster":"hpc1","k8sbridge.io/node":")" +
                                   name + R"(")"
                             : R"("app":"something-else")";
  std::string deletion = terminating ? R"(,"deletionTimestamp":"2026-01-01T00:00:00Z")" : "";
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","namespace":"slurm","uid":"old-)" + name + R"(","labels":{)" + labels + "}" +
         deletion + R"(},"spec":{"containers":[{"name":"slurmd","image":"x"}]},)" +
         R"("status":{"phase":")" + phase + R"("}})";
}

// A Kubernetes node with Ready `ready` and `taints` (a JSON array).
std::string NodeJson(const std::string& name, const std::string& ready,
                     const std::string& taints = "[]") {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
         R"("},"spec":{"taints":)" + taints +
         R"(},"status":{"conditions":[{"type":"Ready","status":")" + ready +
         R"(","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}})";
}

// LeftoverPod bound to Kubernetes node `host`, named `name` (a replacement's name).
std::string BoundPod(const std::string& node, const std::string& host, bool terminating,
                     const std::string& name = "") {
  auto pod = *kube::Object::Parse(LeftoverPod(node, "Running", true, terminating));
  pod.SetString("/spec/nodeName", host);
  if (!name.empty()) {
    pod.SetString("/metadata/name", name);
    pod.SetString("/metadata/uid", "old-" + name);
    pod.SetString("/metadata/labels/k8sbridge.io~1replacement", name.substr(name.find('.') + 1));
  }
  return pod.ToJson();
}

struct Fixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  std::unique_ptr<kube::Client> client;
  FakeApi api;
  k8sbridge::slurm::RecordingSlurm slurm;
  power::PowerSetup setup;

  Fixture() {
    auto c =
        conf::ParseBridgeConfig(kConf, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    setup.config = std::move(*c);
    auto t = power::ParsePodTemplate(kTemplate, "/t.yaml");
    BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    setup.templates.emplace("gpu", std::move(*t));

    client = kube::testing::NoRetryClient(transport, clock, log, "t0");
    transport->SetFallback([this](const FakeTransport::Recorded& r) { return api.Serve(r); });
  }

  power::PowerContext Context(kube::EventRecorder* events = nullptr) {
    return power::PowerContext{setup, *client, slurm, log, events};
  }

  // Requests per method and pod name (POST by body name).
  int Count(const std::string& method, const std::string& name) const {
    int n = 0;
    for (const auto& r : transport->requests()) {
      if (r.method != method)
        continue;
      std::string got = r.method == "POST" ? kube::Object::Parse(r.body)->Name()
                                           : r.url.substr(r.url.rfind('/') + 1);
      if (auto q = got.find('?'); q != std::string::npos)
        got.resize(q);
      if (got == name)
        ++n;
    }
    return n;
  }

  const power::NodeOutcome& Outcome(const power::PowerReport& report, const std::string& node) {
    for (const auto& o : report.nodes) {
      if (o.node == node)
        return o;
    }
    BOOST_FAIL("no outcome for " + node);
    return report.nodes.front();
  }
};

power::ResumeRequest OneJob(std::vector<std::string> nodes, std::string features = "") {
  power::ResumeRequest request;
  request.all_nodes_resume = nodes;
  power::ResumeJob job;
  job.job_id = 42;
  job.features = std::move(features);
  job.nodes_alloc = nodes;
  job.nodes_resume = nodes;
  request.jobs.push_back(std::move(job));
  return request;
}

}  // namespace

// Counts encodes; fails them when told to.
class CountingMunge final : public container::MungeCodec {
 public:
  k8sbridge::Result<std::string> Encode(std::string_view payload) override {
    ++encodes;
    if (!up)
      return k8sbridge::Status::Unavailable("no munged at /run/munge/munge.socket.2");
    return "MUNGE:" + std::string(payload);
  }
  container::MungeDecoded Decode(std::string_view) override { return {}; }
  int encodes = 0;
  bool up = true;
};

BOOST_AUTO_TEST_SUITE(power_actions)

BOOST_FIXTURE_TEST_CASE(one_munge_credential_serves_every_pod_of_a_resume, Fixture) {
  CountingMunge munge;
  auto ctx = Context();
  ctx.munge = &munge;
  std::vector<std::string> nodes = {"w-0", "w-1", "w-2"};
  for (const auto& node : nodes)
    slurm.SetGres(node, "gpu:8");
  auto report = power::Resume(ctx, nodes, OneJob(nodes));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(munge.encodes == 1);
  for (const auto& node : nodes) {
    kube::Object pod = api.Pod(node);
    bool found = false;
    for (const auto& e : pod.json()["spec"]["containers"][0]["env"].GetArray()) {
      if (std::string(e["name"].GetString()) == "K8SBRIDGE_MUNGE_CHECK") {
        found = true;
        BOOST_TEST(std::string(e["value"].GetString()) ==
                   "MUNGE:k8sbridge-munge-check cluster=hpc1");
      }
    }
    BOOST_TEST(found);
  }
}

BOOST_FIXTURE_TEST_CASE(no_munged_fails_the_nodes_before_any_pod, Fixture) {
  CountingMunge munge;
  munge.up = false;
  auto ctx = Context();
  ctx.munge = &munge;
  std::vector<std::string> nodes = {"w-0", "w-1"};
  for (const auto& node : nodes)
    slurm.SetGres(node, "gpu:8");
  auto report = power::Resume(ctx, nodes, OneJob(nodes));
  BOOST_TEST(report.Failed() == 2u);
  BOOST_TEST(api.PodCount() == 0u);
  BOOST_TEST(slurm.failed().at("w-0").find("no munged") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(resume_creates_one_rendered_pod_per_node, Fixture) {
  slurm.SetGres("w-0", "gpu:h100:8");
  slurm.SetGres("w-1", "gpu:h100:8");
  slurm.SetGres("w-2", "gpu:h100:8");
  std::vector<std::string> nodes = {"w-0", "w-1", "w-2"};
  auto report = power::Resume(Context(), nodes, OneJob(nodes, "h100"));

  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(slurm.failed().empty());
  BOOST_TEST(api.PodCount() == 3u);
  for (const auto& node : nodes) {
    BOOST_TEST((Outcome(report, node).action == power::NodeAction::kCreated));
    BOOST_TEST(Count("POST", node) == 1);
    kube::Object pod = api.Pod(node);
    BOOST_TEST(pod.Name() == node);
    BOOST_TEST(pod.Namespace() == "slurm");
    BOOST_TEST(power::IsOwnedWorkerPod(pod, "hpc1", node));
    BOOST_TEST(pod.Labels().at("k8sbridge.io/job") == "42");
    BOOST_TEST(pod.String("/spec/nodeSelector/nvidia.com~1gpu.product") == "H100");
    BOOST_TEST(pod.String("/spec/containers/0/resources/requests/nvidia.com~1gpu") == "8");
    BOOST_TEST(pod.String("/spec/containers/0/resources/limits/nvidia.com~1gpu") == "8");

    // Exactly what RenderWorkerPod makes for this node.
    power::WorkerPodRequest want_request;
    want_request.node = node;
    want_request.gres = "gpu:h100:8";
    auto request = OneJob(nodes, "h100");
    want_request.jobs = request.JobsOf(node);
    auto want = power::RenderWorkerPod(setup.config, setup.config.node_groups[0],
                                       setup.templates.at("gpu"), want_request, log);
    BOOST_REQUIRE(want.ok());
    for (const auto& r : transport->requests()) {
      if (r.method == "POST" && kube::Object::Parse(r.body)->Name() == node)
        BOOST_TEST(kube::Object::Parse(r.body)->ToJson() == want->ToJson());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(existing_healthy_pod_counts_as_success_without_create, Fixture) {
  api.Put("w-0", LeftoverPod("w-0", "Running", true));
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kExisting));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(Count("DELETE", "w-0") == 0);
  BOOST_TEST(api.Pod("w-0").Uid() == "old-w-0");  // untouched
  BOOST_TEST(slurm.failed().empty());
}

BOOST_FIXTURE_TEST_CASE(failed_leftover_is_deleted_and_recreated, Fixture) {
  api.Put("w-1", LeftoverPod("w-1", "Failed", true));
  auto report = power::Resume(Context(), {"w-1"}, OneJob({"w-1"}));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kReplaced));
  BOOST_TEST(Count("DELETE", "w-1") == 1);
  BOOST_TEST(Count("POST", "w-1") == 2);  // 409, then the new pod
  BOOST_TEST(api.Has("w-1"));
  BOOST_TEST(api.Pod("w-1").Uid() != "old-w-1");
  BOOST_TEST(power::IsOwnedWorkerPod(api.Pod("w-1"), "hpc1", "w-1"));
  // The delete named the leftover's uid, so a newer pod would be left alone.
  for (const auto& r : transport->requests()) {
    if (r.method == "DELETE")
      BOOST_TEST(r.body.find("old-w-1") != std::string::npos, r.body);
  }
}

BOOST_FIXTURE_TEST_CASE(terminating_leftover_is_awaited_then_recreated, Fixture) {
  api.Put("w-4", LeftoverPod("w-4", "Running", true, /*terminating=*/true));
  api.GoneAfterGets("w-4", 3);
  auto report = power::Resume(Context(), {"w-4"}, OneJob({"w-4"}));
  BOOST_TEST((Outcome(report, "w-4").action == power::NodeAction::kReplaced));
  BOOST_TEST(Count("DELETE", "w-4") == 0);  // already being deleted
  BOOST_TEST(api.Pod("w-4").Uid() != "old-w-4");
  BOOST_TEST(!api.Pod("w-4").IsBeingDeleted());
}

BOOST_FIXTURE_TEST_CASE(leftover_that_never_goes_fails_the_node_at_the_deadline, Fixture) {
  api.Put("w-5", LeftoverPod("w-5", "Running", true, /*terminating=*/true));
  auto report = power::Resume(Context(), {"w-5"}, OneJob({"w-5"}));
  BOOST_TEST((Outcome(report, "w-5").action == power::NodeAction::kFailed));
  BOOST_TEST(slurm.failed()["w-5"].find("still there") != std::string::npos, slurm.failed()["w-5"]);
  BOOST_TEST(clock.total_slept() <= std::chrono::seconds(10));
}

// The old pod is Terminating on a Kubernetes node whose kubelet is gone: it may stay
// so for ever. The resume does not wait for it: the node gets a pod under its next
// name at once, the old one is never force-deleted.
BOOST_FIXTURE_TEST_CASE(pod_stuck_on_a_lost_node_gets_a_replacement_at_once, Fixture) {
  api.PutNode("n-0", NodeJson("n-0", "Unknown"));
  api.Put("w-0", BoundPod("w-0", "n-0", /*terminating=*/true));
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kReplaced));
  BOOST_TEST(clock.total_slept() == std::chrono::seconds(0));  // nothing awaited
  BOOST_TEST(Count("DELETE", "w-0") == 0);
  BOOST_TEST(api.Pod("w-0").Uid() == "old-w-0");  // left to Kubernetes
  BOOST_REQUIRE(api.Has("w-0.1"));
  kube::Object replacement = api.Pod("w-0.1");
  BOOST_TEST(power::IsOwnedWorkerPod(replacement, "hpc1", "w-0"));
  BOOST_TEST(replacement.String("/spec/hostname") == "w-0");
  BOOST_TEST(replacement.Labels()["k8sbridge.io/replacement"] == "1");
  BOOST_TEST(log.Contains("left to Kubernetes", LogLevel::kWarning));
  BOOST_TEST(slurm.failed().empty());
  // Resumed again while both are there: the replacement counts.
  auto again = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(again, "w-0").action == power::NodeAction::kExisting));
  BOOST_TEST(api.PodCount() == 2u);
}

// A suspend during an API outage could not delete w-0's live replacement, and its
// stranded first pod has since gone: the node's own name is free again. The
// replacement is the node's pod: a second pod would be a second slurmd for w-0 (the
// chaos suite's long run: w-13 and w-13.1 both live after a 60 s outage).
BOOST_FIXTURE_TEST_CASE(a_live_replacement_is_the_nodes_pod_when_its_name_is_free, Fixture) {
  api.PutNode("n-1", NodeJson("n-1", "True"));
  api.Put("w-0.1", BoundPod("w-0", "n-1", false, "w-0.1"));
  auto report = power::Resume(Context(), {"w-0", "w-1"}, OneJob({"w-0", "w-1"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kExisting));
  BOOST_TEST(!api.Has("w-0"));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kCreated));
  BOOST_TEST(api.PodCount() == 2u);  // w-0.1 and w-1
  BOOST_TEST(log.Contains("replacement pod slurm/w-0.1 is still there"));
}

// A replacement that failed is deleted and the node gets a pod under its own name;
// one stranded on a lost node counts as no pod, as a first pod there would.
BOOST_FIXTURE_TEST_CASE(a_failed_or_stranded_replacement_gives_way_to_a_new_pod, Fixture) {
  api.PutNode("n-0", NodeJson("n-0", "Unknown"));
  api.PutNode("n-1", NodeJson("n-1", "True"));
  auto failed = *kube::Object::Parse(BoundPod("w-2", "n-1", false, "w-2.1"));
  failed.SetString("/status/phase", "Failed");
  api.Put("w-2.1", failed.ToJson());
  api.Put("w-3.1", BoundPod("w-3", "n-0", false, "w-3.1"));
  auto report = power::Resume(Context(), {"w-2", "w-3"}, OneJob({"w-2", "w-3"}));
  BOOST_TEST((Outcome(report, "w-2").action == power::NodeAction::kCreated));
  BOOST_TEST(!api.Has("w-2.1"));
  BOOST_TEST(api.Has("w-2"));
  BOOST_TEST((Outcome(report, "w-3").action == power::NodeAction::kCreated));
  BOOST_TEST(api.Has("w-3"));
  BOOST_TEST(Count("DELETE", "w-3.1") == 1);  // gracefully, and left to Kubernetes
}

// A pod of ours still Running on a lost node is deleted gracefully (never forced),
// then the node gets its next name.
BOOST_FIXTURE_TEST_CASE(running_pod_on_a_lost_node_is_deleted_gracefully_and_replaced, Fixture) {
  api.PutNode("n-0",
              NodeJson("n-0", "True",
                       R"([{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}])"));
  api.Put("w-1", BoundPod("w-1", "n-0", false));
  auto report = power::Resume(Context(), {"w-1"}, OneJob({"w-1"}));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kReplaced));
  BOOST_TEST(Count("DELETE", "w-1") == 1);
  BOOST_TEST(api.Has("w-1.1"));
  for (const auto& r : transport->requests()) {
    if (r.method == "DELETE")
      BOOST_TEST(r.body.find("gracePeriodSeconds") == std::string::npos, r.body);
  }
}

// Where Kubernetes' pod GC would force-delete too (the Node object gone, or NotReady
// with out-of-service), the stuck pod is force-deleted by uid and its name reused.
// out-of-service on a Ready node is not enough.
BOOST_FIXTURE_TEST_CASE(pod_on_a_deleted_or_out_of_service_node_is_force_deleted, Fixture) {
  const std::string oos = R"([{"key":"node.kubernetes.io/out-of-service","effect":"NoExecute"}])";
  api.Put("w-2", BoundPod("w-2", "gone-node", true));
  api.PutNode("n-3", NodeJson("n-3", "False", oos));
  api.Put("w-3", BoundPod("w-3", "n-3", true));
  auto report = power::Resume(Context(), {"w-2", "w-3"}, OneJob({"w-2", "w-3"}));
  for (std::string node : {"w-2", "w-3"}) {
    BOOST_TEST((Outcome(report, node).action == power::NodeAction::kReplaced), node);
    BOOST_TEST(Count("DELETE", node) == 1, node);
    BOOST_TEST(api.Pod(node).Uid() != "old-" + node, node);
    BOOST_TEST(!api.Has(node + ".1"), node);
  }
  for (const auto& r : transport->requests()) {
    if (r.method == "DELETE") {
      BOOST_TEST(r.body.find(R"("gracePeriodSeconds":0)") != std::string::npos, r.body);
      BOOST_TEST(r.body.find("old-w-") != std::string::npos, r.body);
    }
  }
  api.PutNode("n-4", NodeJson("n-4", "True", oos));
  api.Put("w-4", BoundPod("w-4", "n-4", true));
  api.GoneAfterGets("w-4", 2);
  auto ready = power::Resume(Context(), {"w-4"}, OneJob({"w-4"}));
  BOOST_TEST((Outcome(ready, "w-4").action == power::NodeAction::kReplaced));
  BOOST_TEST(Count("DELETE", "w-4") == 0);  // awaited, as any terminating leftover
}

// Suspend finds a node's pods by their node label: the replacement is deleted, the
// old one stuck Terminating is left as it is.
BOOST_FIXTURE_TEST_CASE(suspend_deletes_a_replacement_found_by_its_node_label, Fixture) {
  api.PutNode("n-0", NodeJson("n-0", "Unknown"));
  api.Put("w-0", BoundPod("w-0", "n-0", true));
  api.Put("w-0.1", BoundPod("w-0", "n-1", false, "w-0.1"));
  auto report = power::Suspend(Context(), {"w-0"});
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kDeleted));
  BOOST_TEST(!api.Has("w-0.1"));
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(Count("DELETE", "w-0") == 0);
}

// The list of all the nodes' pods fails (an API outage that outlasts RetryDeadline;
// here a 403 once): each node's pods are listed by its node label again, so a
// replacement (another name) is still deleted, not missed by a read by name and left
// as an orphan (seen in the chaos suite's long run).
BOOST_FIXTURE_TEST_CASE(suspend_lists_each_nodes_pods_when_the_list_of_all_fails, Fixture) {
  api.Put("w-0.1", BoundPod("w-0", "n-1", false, "w-0.1"));
  api.FailNext("GET", "", {403, StatusJson(403, "Forbidden", "pods is forbidden"), {}});
  auto report = power::Suspend(Context(), {"w-0", "w-1"});
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kDeleted));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kAbsent));
  BOOST_TEST(!api.Has("w-0.1"));
  BOOST_TEST(api.lists_ == 2);  // the failed one is answered before it counts: w-0's, w-1's
}

BOOST_FIXTURE_TEST_CASE(foreign_pod_is_never_touched_on_resume, Fixture) {
  api.Put("w-2", LeftoverPod("w-2", "Failed", false));
  auto report = power::Resume(Context(), {"w-2", "w-3"}, OneJob({"w-2", "w-3"}));
  BOOST_TEST((Outcome(report, "w-2").action == power::NodeAction::kFailed));
  BOOST_TEST((Outcome(report, "w-3").action == power::NodeAction::kCreated));
  BOOST_TEST(Count("DELETE", "w-2") == 0);
  BOOST_TEST(api.Pod("w-2").Uid() == "old-w-2");
  auto failed = slurm.failed();
  BOOST_REQUIRE(failed.count("w-2") == 1u);
  BOOST_TEST(failed["w-2"].rfind("k8sbridge: ", 0) == 0u);
  BOOST_TEST(failed.count("w-3") == 0u);
}

BOOST_FIXTURE_TEST_CASE(rejected_pod_fails_only_that_node_with_the_api_message, Fixture) {
  const std::string message = R"(Pod \"w-1\" is invalid: spec.containers[0].image: Required value)";
  api.FailNext("POST", "w-1", {422, StatusJson(422, "Invalid", message), {}});
  std::vector<std::string> nodes = {"w-0", "w-1", "w-2"};
  auto report = power::Resume(Context(), nodes, OneJob(nodes));

  BOOST_TEST(report.Failed() == 1u);
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kFailed));
  BOOST_TEST(Count("POST", "w-1") == 1);  // 422 is not retried
  auto failed = slurm.failed();
  BOOST_REQUIRE(failed.size() == 1u);
  BOOST_TEST(failed["w-1"] ==
             R"(k8sbridge: Pod "w-1" is invalid: spec.containers[0].image: Required value)");
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(api.Has("w-2"));
  BOOST_TEST(!api.Has("w-1"));
  BOOST_TEST(log.Contains("spec.containers[0].image", LogLevel::kError));
}

// Resume reads only a create's code: the pod in a 201 answer is never decoded
// (1000 of them were a tenth of a resume's CPU), so one that is not JSON still
// counts the node as created.
BOOST_FIXTURE_TEST_CASE(a_created_pod_is_judged_by_the_answers_code_alone, Fixture) {
  api.FailNext("POST", "w-0", {201, "not JSON: never decoded", {}});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kCreated));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(Count("POST", "w-0") == 1);
  BOOST_TEST(slurm.failed().empty());
}

BOOST_FIXTURE_TEST_CASE(throttled_and_unavailable_answers_are_retried, Fixture) {
  api.FailNext("POST", "w-0",
               {429, StatusJson(429, "TooManyRequests", "slow down"), {{"Retry-After", "1"}}});
  api.FailNext("POST", "w-0", {503, StatusJson(503, "ServiceUnavailable", "etcd"), {}});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kCreated));
  BOOST_TEST(Count("POST", "w-0") == 3);
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(slurm.failed().empty());
  BOOST_TEST(clock.total_slept() >= std::chrono::seconds(1));  // honoured Retry-After
}

BOOST_FIXTURE_TEST_CASE(retries_stop_at_the_retry_deadline_and_fail_the_node, Fixture) {
  for (int i = 0; i < 200; ++i)
    api.FailNext("POST", "w-0", {503, StatusJson(503, "ServiceUnavailable", "etcd down"), {}});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kFailed));
  BOOST_TEST(clock.total_slept() <= std::chrono::seconds(10));
  BOOST_TEST(Count("POST", "w-0") < 200);
  BOOST_TEST(slurm.failed()["w-0"] == "k8sbridge: etcd down");
}

BOOST_FIXTURE_TEST_CASE(node_outside_every_group_fails_with_the_fix, Fixture) {
  auto report = power::Resume(Context(), {"other-1"}, {});
  BOOST_TEST((Outcome(report, "other-1").action == power::NodeAction::kFailed));
  BOOST_TEST(slurm.failed()["other-1"].find("NodeGroup") != std::string::npos);
  BOOST_TEST(transport->requests().empty());
}

BOOST_FIXTURE_TEST_CASE(suspend_deletes_owned_pods_and_counts_404_as_success, Fixture) {
  api.Put("w-0", LeftoverPod("w-0", "Running", true));
  auto report = power::Suspend(Context(), {"w-0", "w-1"});
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kDeleted));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kAbsent));
  BOOST_TEST(!api.Has("w-0"));
  BOOST_TEST(slurm.failed().empty());
  // One list of our pods; only the node missing from it is read by name.
  BOOST_TEST(api.lists_ == 1);
  BOOST_TEST(Count("GET", "w-0") == 0);
  BOOST_TEST(Count("GET", "w-1") == 1);
  // With the pod's own grace period: no gracePeriodSeconds override.
  for (const auto& r : transport->requests()) {
    if (r.method == "DELETE")
      BOOST_TEST(r.body.find("gracePeriodSeconds") == std::string::npos, r.body);
  }
}

BOOST_FIXTURE_TEST_CASE(suspend_delete_answered_404_is_success, Fixture) {
  api.Put("w-0", LeftoverPod("w-0", "Running", true));
  api.FailNext("DELETE", "w-0", {404, StatusJson(404, "NotFound", "gone"), {}});
  auto report = power::Suspend(Context(), {"w-0"});
  BOOST_TEST(report.Failed() == 0u);
}

BOOST_FIXTURE_TEST_CASE(suspend_never_deletes_a_foreign_pod, Fixture) {
  api.Put("w-0", LeftoverPod("w-0", "Running", false));
  auto report = power::Suspend(Context(), {"w-0"});
  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kFailed));
  BOOST_TEST(Count("DELETE", "w-0") == 0);
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(log.Contains("not touched", LogLevel::kError));
}

BOOST_FIXTURE_TEST_CASE(resume_fail_records_why_then_deletes, Fixture) {
  std::string pending = LeftoverPod("w-0", "Pending", true);
  auto pod = *kube::Object::Parse(pending);
  pod.SetJson("/status/conditions",
              R"([{"type":"PodScheduled","status":"False","reason":"Unschedulable",)"
              R"("message":"0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}])");
  api.Put("w-0", pod.ToJson());
  api.Put("w-1", LeftoverPod("w-1", "Running", false));
  kube::EventRecorderOptions eo;
  eo.start_thread = false;
  kube::EventRecorder events(*client, eo);
  auto report = power::ResumeFail(Context(&events), {"w-0", "w-1"});
  events.ProcessPending();

  BOOST_TEST((Outcome(report, "w-0").action == power::NodeAction::kDeleted));
  BOOST_TEST((Outcome(report, "w-1").action == power::NodeAction::kFailed));
  BOOST_TEST(!api.Has("w-0"));
  BOOST_TEST(api.Has("w-1"));  // not ours
  BOOST_TEST(log.Contains("Insufficient nvidia.com/gpu", LogLevel::kWarning));
  auto sent = api.events();
  BOOST_REQUIRE(sent.size() == 1u);
  BOOST_TEST(sent[0].find("ResumeFailed") != std::string::npos);
  BOOST_TEST(sent[0].find("Insufficient nvidia.com/gpu") != std::string::npos);
  BOOST_TEST(sent[0].find("old-w-0") != std::string::npos);  // regarding the pod's uid
  BOOST_TEST(slurm.failed().empty());                        // Slurm already failed the node itself
}

BOOST_FIXTURE_TEST_CASE(feature_placement_lists_only_this_clusters_worker_pods, Fixture) {
  // One H100 Kubernetes node, its 8 GPUs held by the running worker pod of w-5: no
  // room for w-0. The shipped RBAC grants pods in Namespace= only, so the check must
  // read this cluster's worker pods there, not every pod of the cluster.
  api.SetNodes(R"([{"metadata":{"name":"k-0","labels":{"nvidia.com/gpu.product":"H100"}},)"
               R"("status":{"allocatable":{"nvidia.com/gpu":"8"},)"
               R"("conditions":[{"type":"Ready","status":"True"}]}}])");
  auto busy = *kube::Object::Parse(LeftoverPod("w-5", "Running", true));
  busy.SetString("/spec/nodeName", "k-0");
  busy.SetString("/spec/containers/0/resources/requests/nvidia.com~1gpu", "8");
  api.Put("w-5", busy.ToJson());
  slurm.SetGres("w-0", "gpu:8");
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}, "h100"));
  BOOST_TEST(report.Failed() == 1u);
  BOOST_TEST(!api.Has("w-0"));
  BOOST_TEST(slurm.failed()["w-0"].find("no Kubernetes node offers features [42: h100]") !=
                 std::string::npos,
             slurm.failed()["w-0"]);
  BOOST_TEST(!log.Contains("cannot list", LogLevel::kWarning));
  int pod_lists = 0;
  for (const auto& r : transport->requests()) {
    if (r.method != "GET")
      continue;
    BOOST_TEST(r.url.find("/api/v1/pods") == std::string::npos, r.url);
    if (r.url.starts_with("https://k8s.test:6443/api/v1/namespaces/slurm/pods?")) {
      pod_lists += r.url.find("replacement") == std::string::npos;  // the placement's
      BOOST_TEST(r.url.find("labelSelector=app.kubernetes.io%2Fmanaged-by%3Dk8sbridge%2C"
                            "k8sbridge.io%2Fcluster%3Dhpc1") != std::string::npos,
                 r.url);
    }
  }
  BOOST_TEST(pod_lists == 1);
}

// A fresh slurmctld holds no active features for a node whose Features= it cannot
// tell apart (NULL), and takes its available ones as active when slurmd registers.
k8sbridge::slurm::Node PoweringUp(const std::string& name, std::string features,
                                  std::string active) {
  k8sbridge::slurm::Node n;
  n.name = name;
  n.base = k8sbridge::slurm::Node::Base::kIdle;
  n.cloud = true;
  n.powering_up = true;
  n.features = std::move(features);
  n.features_act = std::move(active);
  n.gres = "gpu:8";
  return n;
}

BOOST_FIXTURE_TEST_CASE(resume_drops_active_features_the_pod_is_not_placed_for, Fixture) {
  slurm.SetNodes({PoweringUp("w-0", "h100,rack1", "")});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(slurm.calls() == (std::vector<std::string>{"features w-0 h100,rack1 rack1"}));
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(!api.Pod("w-0").Has("/spec/nodeSelector"));
  BOOST_TEST(log.Contains("node w-0: active features h100,rack1 -> rack1", LogLevel::kInfo));
}

BOOST_FIXTURE_TEST_CASE(resume_into_a_feature_keeps_it_active, Fixture) {
  // -C h100: slurmctld made h100 active, and the pod is placed on an H100 node.
  slurm.SetNodes({PoweringUp("w-0", "h100", "h100")});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}, "h100"));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(api.Pod("w-0").String("/spec/nodeSelector/nvidia.com~1gpu.product") == "H100");
}

BOOST_FIXTURE_TEST_CASE(only_changeable_features_leave_none_active, Fixture) {
  slurm.SetNodes({PoweringUp("w-0", "h100", "")});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(slurm.calls() == (std::vector<std::string>{"features w-0 h100 ,"}));
  BOOST_TEST(log.Contains("node w-0: active features h100 -> (none)", LogLevel::kInfo));
}

BOOST_FIXTURE_TEST_CASE(unreadable_active_features_do_not_fail_the_resume, Fixture) {
  setup.config.node_groups[0].gpus = 8;  // the Gres need no read
  slurm.SetNodes({PoweringUp("w-1", "h100", "")});
  auto report = power::Resume(Context(), {"w-0"}, OneJob({"w-0"}));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(api.Has("w-0"));
  BOOST_TEST(log.Contains("node w-0: its active features cannot be read", LogLevel::kWarning));
}

BOOST_AUTO_TEST_CASE(node_reason_is_one_bounded_line) {
  auto s = k8sbridge::Status::InvalidArgument("line one\nline two");
  BOOST_TEST(power::NodeReason(s) == "k8sbridge: line one line two");
  auto long_one = k8sbridge::Status::InvalidArgument(std::string(500, 'x'));
  BOOST_TEST(power::NodeReason(long_one).size() == 200u);
}

BOOST_AUTO_TEST_SUITE_END()
