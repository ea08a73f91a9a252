// The controllers kubesim runs in place of kube-controller-manager (lifecycle.h), the
// DefaultTolerationSeconds admission and PodDisruptionBudgets on eviction.
#include <boost/test/unit_test.hpp>

#include "api.h"
#include "disruption.h"
#include "fake_clock.h"
#include "k8sbridge/log.h"
#include "lifecycle.h"
#include "nodes.h"
#include "store.h"
#include "test_util.h"

using namespace kubesim;
using namespace kubesim::testing;
using std::chrono::seconds;

namespace {

// `json` as a value owned by `into`'s allocator.
rapidjson::Value Copy(rapidjson::Document& into, const std::string& json) {
  rapidjson::Document parsed = Json(json);
  return rapidjson::Value(parsed, into.GetAllocator());
}

struct Fixture {
  k8sbridge::FakeClock clock;
  k8sbridge::NullLogger log;
  Store store{clock, 1000};
  Api api{store};
  Controllers controllers{store, log, MakeOptions()};
  Fixture() {
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    FakeNodeOptions nodes;
    nodes.count = 2;
    for (auto& node : MakeFakeNodes(nodes))
      BOOST_REQUIRE(store.Create("nodes", "", std::move(*node)).ok());
  }
  static ControllerOptions MakeOptions() {
    ControllerOptions o;
    o.pod_gc_quarantine = std::chrono::seconds(40);
    return o;
  }

  ApiResponse Call(const std::string& method, const std::string& target,
                   const std::string& body = "") {
    return CallApi(api, method, target, body);
  }

  // A running, Ready pod bound to `node`, created through the API (so admission runs).
  void RunningPod(const std::string& name, const std::string& node,
                  const std::string& tolerations = "[]", const std::string& labels = "{}") {
    auto r = Call("POST", "/api/v1/namespaces/default/pods",
                  R"({"metadata":{"name":")" + name + R"(","labels":)" + labels +
                      R"(},"spec":{"nodeName":")" + node +
                      R"(","containers":[{"name":"c","image":"x"}],"tolerations":)" + tolerations +
                      "}}");
    BOOST_REQUIRE_MESSAGE(r.code == 201, r.body);
    auto s = store.Mutate("pods", "default", name, [&](rapidjson::Document& pod) {
      SetMember(pod, "status.phase", rapidjson::Value("Running"));
      SetCondition(pod, "Ready", "True", "", "", store.NowTimestamp());
      return Status::Ok();
    });
    BOOST_REQUIRE(s.ok());
  }

  void SetNodeReady(const std::string& node, const std::string& status) {
    auto r = store.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
      SetNodeReadyCondition(doc, status, "Test", "set by the test", store.NowTimestamp());
      return Status::Ok();
    });
    BOOST_REQUIRE(r.ok());
  }

  void Annotate(const std::string& node, const std::string& value) {
    auto r = store.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
      if (value.empty()) {
        doc["metadata"]["annotations"].RemoveMember(kNodeFaultAnnotation);
      } else {
        SetMember(
            doc, "metadata.annotations",
            Copy(doc, std::string(R"({")") + kNodeFaultAnnotation + R"(":")" + value + "\"}"));
      }
      return Status::Ok();
    });
    BOOST_REQUIRE(r.ok());
  }

  // "key:effect" of each taint of the node, with "+t" when it has a timeAdded.
  std::vector<std::string> Taints(const std::string& node) {
    std::vector<std::string> out;
    auto n = store.Get("nodes", "", node);
    const rapidjson::Value* taints = Find(**n, "spec.taints");
    if (taints == nullptr)
      return out;
    for (const auto& t : taints->GetArray()) {
      out.push_back(GetString(t, "key") + ":" + GetString(t, "effect") +
                    (GetString(t, "timeAdded").empty() ? "" : "+t"));
    }
    return out;
  }

  std::string Condition(const rapidjson::Value& object, const std::string& type,
                        const char* field = "status") {
    const rapidjson::Value* conditions = Find(object, "status.conditions");
    if (conditions == nullptr)
      return "";
    for (const auto& c : conditions->GetArray()) {
      if (GetString(c, "type") == type)
        return GetString(c, field);
    }
    return "";
  }

  ObjectPtr Pod(const std::string& name) {
    auto p = store.Get("pods", "default", name);
    return p.ok() ? *p : nullptr;
  }
};

using Strings = std::vector<std::string>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(lifecycle, Fixture)

BOOST_AUTO_TEST_CASE(node_taints_follow_the_ready_condition) {
  RunningPod("p", "node-0", R"([{"operator":"Exists"}])");
  controllers.RunOnce();
  BOOST_TEST(Taints("node-0").empty());
  SetNodeReady("node-0", "False");
  controllers.RunOnce();
  BOOST_TEST(Taints("node-0") == (Strings{"node.kubernetes.io/not-ready:NoSchedule",
                                          "node.kubernetes.io/not-ready:NoExecute+t"}),
             boost::test_tools::per_element());
  BOOST_TEST(Condition(*Pod("p"), "Ready") == "False");  // MarkPodsNotReady
  SetNodeReady("node-0", "Unknown");
  controllers.RunOnce();
  BOOST_TEST(Taints("node-0") == (Strings{"node.kubernetes.io/unreachable:NoSchedule",
                                          "node.kubernetes.io/unreachable:NoExecute+t"}),
             boost::test_tools::per_element());
  SetNodeReady("node-0", "True");
  controllers.RunOnce();
  BOOST_TEST(Taints("node-0").empty());
}

BOOST_AUTO_TEST_CASE(fault_annotation_loses_a_node_without_a_kubelet) {
  Annotate("node-0", "NotReady");
  controllers.RunOnce();
  auto node = store.Get("nodes", "", "node-0");
  BOOST_TEST(Condition(**node, "Ready") == "Unknown");
  BOOST_TEST(Condition(**node, "Ready", "reason") == "NodeStatusUnknown");
  BOOST_TEST(Condition(**node, "Ready", "message") == "Kubelet stopped posting node status.");
  BOOST_TEST(Taints("node-0") == (Strings{"node.kubernetes.io/unreachable:NoSchedule",
                                          "node.kubernetes.io/unreachable:NoExecute+t"}),
             boost::test_tools::per_element());
  Annotate("node-0", "");
  controllers.RunOnce();
  BOOST_TEST(Condition(**store.Get("nodes", "", "node-0"), "Ready") == "True");
  BOOST_TEST(Taints("node-0").empty());
  // A node a kubelet runs is the kubelet's to fail.
  store.RegisterKubelet("node-1");
  Annotate("node-1", "NotReady");
  controllers.RunOnce();
  BOOST_TEST(Condition(**store.Get("nodes", "", "node-1"), "Ready") == "True");
}

BOOST_AUTO_TEST_CASE(default_toleration_seconds_admission) {
  RunningPod("plain", "node-0");
  auto tolerations = ToJson((*Pod("plain"))["spec"]["tolerations"]);
  BOOST_TEST(tolerations ==
             R"([{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",)"
             R"("tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":)"
             R"("Exists","effect":"NoExecute","tolerationSeconds":300}])");
  AdmissionOptions shorter;
  shorter.default_unreachable_toleration_seconds = 2;
  api.set_admission(shorter);
  RunningPod(
      "own", "node-0",
      R"([{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute"}])");
  BOOST_TEST(ToJson((*Pod("own"))["spec"]["tolerations"]) ==
             R"([{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute"},)"
             R"({"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute",)"
             R"("tolerationSeconds":2}])");
  RunningPod("all", "node-0", R"([{"operator":"Exists"}])");
  BOOST_TEST((*Pod("all"))["spec"]["tolerations"].Size() == 1u);
}

BOOST_AUTO_TEST_CASE(taint_manager_evicts_after_the_toleration) {
  RunningPod("none", "node-0", R"([{"key":"other","operator":"Exists"}])");
  RunningPod("short", "node-0",
             R"([{"key":"k","operator":"Exists","effect":"NoExecute","tolerationSeconds":5}])");
  RunningPod("forever", "node-0", R"([{"key":"k","operator":"Exists"}])");
  auto tainted = store.Mutate("nodes", "", "node-0", [](rapidjson::Document& doc) {
    SetMember(doc, "spec.taints", Copy(doc, R"([{"key":"k","effect":"NoExecute"}])"));
    return Status::Ok();
  });
  BOOST_REQUIRE(tainted.ok());
  // "none" also gets the default tolerations, which do not match key k.
  controllers.RunOnce();
  BOOST_TEST(!GetString(*Pod("none"), "metadata.deletionTimestamp").empty());
  BOOST_TEST(Condition(*Pod("none"), "DisruptionTarget", "reason") == "DeletionByTaintManager");
  BOOST_TEST(Condition(*Pod("none"), "DisruptionTarget", "message") ==
             "Taint manager: deleting due to NoExecute taint");
  clock.Advance(seconds(4));
  controllers.RunOnce();
  BOOST_TEST(GetString(*Pod("short"), "metadata.deletionTimestamp").empty());
  clock.Advance(seconds(1));
  controllers.RunOnce();
  BOOST_TEST(!GetString(*Pod("short"), "metadata.deletionTimestamp").empty());
  clock.Advance(seconds(1000));
  controllers.RunOnce();
  BOOST_TEST(GetString(*Pod("forever"), "metadata.deletionTimestamp").empty());
}

BOOST_AUTO_TEST_CASE(terminating_pods_on_a_lost_node_wait_for_the_node) {
  RunningPod("p", "node-0");
  DeleteOptions grace;
  grace.grace_period_seconds = 1;
  BOOST_REQUIRE(store.Delete("pods", "default", "p", grace).ok());
  SetNodeReady("node-0", "Unknown");
  clock.Advance(seconds(5));
  store.ReapExpired();
  BOOST_TEST(Pod("p") != nullptr);  // no kubelet confirms it
  SetNodeReady("node-0", "True");
  store.ReapExpired();  // the stand-in kubelet of a Ready node confirms
  BOOST_TEST(Pod("p") == nullptr);
}

BOOST_AUTO_TEST_CASE(pod_gc_force_deletes_on_out_of_service_and_deleted_nodes) {
  RunningPod("stuck", "node-0");
  RunningPod("orphan", "node-1");
  BOOST_REQUIRE(store.Delete("pods", "default", "stuck", {}).ok());
  SetNodeReady("node-0", "Unknown");
  controllers.RunOnce();
  BOOST_TEST(Pod("stuck") != nullptr);
  auto oos = store.Mutate("nodes", "", "node-0", [](rapidjson::Document& doc) {
    doc["spec"]["taints"].PushBack(
        Copy(doc, R"({"key":"node.kubernetes.io/out-of-service","effect":"NoExecute"})"),
        doc.GetAllocator());
    return Status::Ok();
  });
  BOOST_REQUIRE(oos.ok());
  controllers.RunOnce();
  BOOST_TEST(Pod("stuck") == nullptr);

  BOOST_REQUIRE(store.Delete("nodes", "", "node-1", {}).ok());
  controllers.RunOnce();
  clock.Advance(seconds(39));
  controllers.RunOnce();
  BOOST_TEST(Pod("orphan") != nullptr);  // still in quarantine
  clock.Advance(seconds(1));
  controllers.RunOnce();
  BOOST_TEST(Pod("orphan") == nullptr);
}

BOOST_AUTO_TEST_CASE(disruption_budget_status_and_eviction) {
  RunningPod("a", "node-0", "[]", R"({"app":"web"})");
  RunningPod("b", "node-1", "[]", R"({"app":"web"})");
  auto created = Call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                      R"({"metadata":{"name":"web"},"spec":{"minAvailable":1,
                          "selector":{"matchLabels":{"app":"web"}}}})");
  BOOST_REQUIRE_MESSAGE(created.code == 201, created.body);
  auto early =
      Call("POST", "/api/v1/namespaces/default/pods/a/eviction", R"({"metadata":{"name":"a"}})");
  BOOST_TEST(early.code == 429);  // the controller has not seen the budget yet
  BOOST_TEST(early.body.find("is still being processed by the server") != std::string::npos);
  controllers.RunOnce();
  auto pdb = Json(Call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web").body);
  BOOST_TEST(ToJson(pdb["status"]["expectedPods"]) == "2");
  BOOST_TEST(ToJson(pdb["status"]["desiredHealthy"]) == "1");
  BOOST_TEST(ToJson(pdb["status"]["currentHealthy"]) == "2");
  BOOST_TEST(ToJson(pdb["status"]["disruptionsAllowed"]) == "1");
  BOOST_TEST(Condition(pdb, "DisruptionAllowed", "reason") == "SufficientPods");

  BOOST_TEST(
      Call("POST", "/api/v1/namespaces/default/pods/a/eviction", R"({"metadata":{"name":"b"}})")
          .code == 400);
  BOOST_TEST(
      Call("POST", "/api/v1/namespaces/default/pods/a/eviction", R"({"metadata":{"name":"a"}})")
          .code == 201);
  pdb = Json(Call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web").body);
  BOOST_TEST(ToJson(pdb["status"]["disruptionsAllowed"]) == "0");
  BOOST_TEST(Find(pdb, "status.disruptedPods.a") != nullptr);
  auto refused =
      Call("POST", "/api/v1/namespaces/default/pods/b/eviction", R"({"metadata":{"name":"b"}})");
  BOOST_TEST(refused.code == 429);
  auto status = Json(refused.body);
  BOOST_TEST(GetString(status, "reason") == "TooManyRequests");
  BOOST_TEST(GetString(status, "message") ==
             "Cannot evict pod as it would violate the pod's disruption budget.");
  // As on a real server, currentHealthy waits for the controller's next pass.
  BOOST_TEST(ToJson(status["details"]["causes"]) ==
             R"([{"reason":"DisruptionBudget","message":"The disruption budget web needs 1 )"
             R"(healthy pods and has 2 currently"}])");
  BOOST_TEST(GetString(*Pod("b"), "metadata.deletionTimestamp").empty());
  controllers.RunOnce();  // a is terminating: 1 healthy of 1 desired
  pdb = Json(Call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web").body);
  BOOST_TEST(ToJson(pdb["status"]["currentHealthy"]) == "1");
  BOOST_TEST(ToJson(pdb["status"]["disruptionsAllowed"]) == "0");
  BOOST_TEST(
      Call("POST", "/api/v1/namespaces/default/pods/b/eviction", R"({"metadata":{"name":"b"}})")
          .code == 429);
}

BOOST_AUTO_TEST_CASE(disruption_budgets_follow_upstream_rules) {
  RunningPod("bare", "node-0", "[]", R"({"app":"bare"})");
  BOOST_TEST(Call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                  R"({"metadata":{"name":"both"},"spec":{"minAvailable":1,"maxUnavailable":1}})")
                 .code == 422);
  BOOST_TEST(Call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                  R"({"metadata":{"name":"pct"},"spec":{"minAvailable":"half"}})")
                 .code == 422);
  BOOST_TEST(Call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                  R"({"metadata":{"name":"max"},"spec":{"maxUnavailable":"50%",
                      "selector":{"matchLabels":{"app":"bare"}}}})")
                 .code == 201);
  controllers.RunOnce();
  auto pdb = Json(Call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/max").body);
  // A percentage needs the scale of the pods' controller; a bare pod has none.
  BOOST_TEST(Condition(pdb, "DisruptionAllowed", "reason") == "SyncFailed");
  BOOST_TEST(Condition(pdb, "DisruptionAllowed", "message") ==
             "found no controller ref for pod \"bare\"");
  BOOST_TEST(ToJson(pdb["status"]["disruptionsAllowed"]) == "0");
  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/pods/bare/eviction",
                  R"({"metadata":{"name":"bare"}})")
                 .code == 429);
  // The same budget over pods of a controller: 50% of 2, rounded up, may go.
  for (const char* name : {"c1", "c2"}) {
    RunningPod(name, "node-1", "[]", R"({"app":"ctl"})");
    auto owned = store.Mutate("pods", "default", name, [](rapidjson::Document& pod) {
      SetMember(pod, "metadata.ownerReferences",
                Copy(pod, R"([{"apiVersion":"apps/v1","kind":"StatefulSet","name":"s","uid":"u1",)"
                          R"("controller":true}])"));
      return Status::Ok();
    });
    BOOST_REQUIRE(owned.ok());
  }
  Call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
       R"({"metadata":{"name":"ctl"},"spec":{"maxUnavailable":"50%",
           "selector":{"matchLabels":{"app":"ctl"}}}})");
  controllers.RunOnce();
  pdb = Json(Call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/ctl").body);
  BOOST_TEST(ToJson(pdb["status"]["desiredHealthy"]) == "1");
  BOOST_TEST(ToJson(pdb["status"]["disruptionsAllowed"]) == "1");
  // Pending pods are evicted without asking the budget.
  Call("POST", "/api/v1/namespaces/default/pods",
       R"({"metadata":{"name":"pending","labels":{"app":"bare"}},
           "spec":{"nodeName":"node-0","containers":[{"name":"c","image":"x"}]}})");
  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/pods/pending/eviction",
                  R"({"metadata":{"name":"pending"}})")
                 .code == 201);
}

BOOST_AUTO_TEST_CASE(policy_v1_discovery) {
  auto groups = Call("GET", "/apis");
  BOOST_TEST(groups.body.find(R"("name":"policy")") != std::string::npos);
  auto resources = Call("GET", "/apis/policy/v1");
  BOOST_TEST(resources.code == 200);
  BOOST_TEST(resources.body.find(R"("name":"poddisruptionbudgets")") != std::string::npos);
  BOOST_TEST(resources.body.find(R"("name":"poddisruptionbudgets/status")") != std::string::npos);
  BOOST_TEST(resources.body.find(R"("pdb")") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
