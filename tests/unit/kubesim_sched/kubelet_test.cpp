// The kubelet's pure pieces and the fault scenarios that only write to the store. Pods
// that really run (namespaces, bridge, veth) need root and are covered by
// tests/integration/test_kubesim_kubelet.py.
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "kubelet.h"
#include "kubelet_net.h"
#include "recording_logger.h"
#include "scheduler.h"
#include "store.h"

namespace kubesim {
namespace {

std::unique_ptr<rapidjson::Document> Json(const std::string& text) {
  auto doc = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(doc.ok(), doc.status().ToString());
  return std::move(*doc);
}

BOOST_AUTO_TEST_SUITE(kubelet_pure)

BOOST_AUTO_TEST_CASE(expands_vars_like_kubernetes) {
  const std::map<std::string, std::string> env{{"A", "1"}, {"NODE", "node-0"}};
  using kubelet_internal::ExpandVars;
  BOOST_CHECK_EQUAL(ExpandVars("x$(A)y", env), "x1y");
  BOOST_CHECK_EQUAL(ExpandVars("--node=$(NODE)", env), "--node=node-0");
  BOOST_CHECK_EQUAL(ExpandVars("$(MISSING)", env), "$(MISSING)");
  BOOST_CHECK_EQUAL(ExpandVars("$$(A)", env), "$(A)");
  BOOST_CHECK_EQUAL(ExpandVars("cost $5", env), "cost $5");
  BOOST_CHECK_EQUAL(ExpandVars("$(A", env), "$(A");
}

BOOST_AUTO_TEST_CASE(field_refs_of_the_downward_api) {
  auto pod = Json(R"({"metadata":{"name":"p","namespace":"ns","uid":"u-1",
      "labels":{"app":"slurmd"},"annotations":{"a/b":"c"}},
      "spec":{"nodeName":"node-3","serviceAccountName":"sa"}})");
  using kubelet_internal::FieldRef;
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "metadata.name", "10.232.0.2", "10.232.0.1"), "p");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "metadata.namespace", "", ""), "ns");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "metadata.uid", "", ""), "u-1");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "spec.nodeName", "", ""), "node-3");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "status.podIP", "10.232.0.2", "h"), "10.232.0.2");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "status.hostIP", "p", "10.232.0.1"), "10.232.0.1");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "metadata.labels['app']", "", ""), "slurmd");
  BOOST_CHECK_EQUAL(*FieldRef(*pod, "metadata.annotations['a/b']", "", ""), "c");
  Result<std::string> bad = FieldRef(*pod, "spec.containers", "", "");
  BOOST_CHECK(!bad.ok());
  BOOST_CHECK(bad.status().message().find("spec.containers") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(exit_reasons) {
  using kubelet_internal::DescribeExit;
  auto exited = [](int code) { return code << 8; };  // a wait status for exit(code)
  BOOST_CHECK_EQUAL(DescribeExit(exited(0), false).reason, "Completed");
  BOOST_CHECK_EQUAL(DescribeExit(exited(3), false).reason, "Error");
  BOOST_CHECK_EQUAL(DescribeExit(exited(3), false).exit_code, 3);
  BOOST_CHECK_EQUAL(DescribeExit(SIGKILL, false).reason, "OOMKilled");
  BOOST_CHECK_EQUAL(DescribeExit(SIGKILL, false).exit_code, 137);
  BOOST_CHECK_EQUAL(DescribeExit(SIGKILL, true).reason, "Error");
  BOOST_CHECK_EQUAL(DescribeExit(SIGTERM, true).exit_code, 143);
}

BOOST_AUTO_TEST_CASE(termination_message_from_the_log_tail) {
  const std::string path = "/tmp/kubesim-logtail-" + std::to_string(getpid());
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i)
      out << "line " << i << "\n";
    out << "fatal: munge key mismatch\n";
  }
  const std::string tail = kubelet_internal::LogTail(path);
  std::remove(path.c_str());
  BOOST_TEST(tail.find("fatal: munge key mismatch") != std::string::npos);
  BOOST_TEST(tail.find("line 20\n") == std::string::npos);  // the last 80 lines only
  BOOST_TEST(tail.find("line 21\n") != std::string::npos);
  BOOST_TEST(kubelet_internal::LogTail(path).empty());  // no log: no message
}

BOOST_AUTO_TEST_CASE(pod_network_and_addresses) {
  Result<PodNetwork> net = ParsePodNetwork("10.232.7.0/24");
  BOOST_REQUIRE(net.ok());
  BOOST_CHECK_EQUAL(FormatIPv4(net->Gateway()), "10.232.7.1");
  BOOST_CHECK_EQUAL(FormatIPv4(net->Broadcast()), "10.232.7.255");
  for (const char* bad : {"10.232.7.0", "10.232.7.1/24", "10.232.0.0/8", "x/24", "10.0.0.0/2x"}) {
    Result<PodNetwork> r = ParsePodNetwork(bad);
    BOOST_CHECK_MESSAGE(!r.ok(), bad);
    if (!r.ok())
      BOOST_CHECK(r.status().message().find(bad) != std::string::npos);
  }
  IpAllocator ips(*ParsePodNetwork("10.232.9.0/29"));  // .2 .. .6 for pods
  std::vector<std::string> got;
  while (auto ip = ips.Allocate())
    got.push_back(FormatIPv4(*ip));
  BOOST_REQUIRE_EQUAL(got.size(), 5u);
  BOOST_CHECK_EQUAL(got.front(), "10.232.9.2");
  BOOST_CHECK_EQUAL(got.back(), "10.232.9.6");
  ips.Release(ParsePodNetwork("10.232.9.0/29")->Gateway() + 2);  // .3
  BOOST_CHECK_EQUAL(FormatIPv4(*ips.Allocate()), "10.232.9.3");
  BOOST_CHECK(CheckInterfaceName("ksim0").ok());
  BOOST_CHECK(!CheckInterfaceName("a-name-longer-than-15").ok());
}

BOOST_AUTO_TEST_SUITE_END()

// ---- Fault scenarios through the store (no processes) ----------------------------------

struct KubeletFixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  Store store{clock};
  KubeletOptions Options() {
    KubeletOptions o;
    o.nodes = {"node-0", "node-1"};
    return o;
  }
  Kubelet kubelet{store, log, Options()};
  KubeletFixture() {
    BOOST_REQUIRE(
        store.Create("namespaces", "", std::move(*Json(R"({"metadata":{"name":"default"}})")))
            .ok());
    for (const char* n : {"node-0", "node-1"}) {
      auto node = Json(std::string(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")") + n +
                       R"("},"status":{"allocatable":{"cpu":"4","memory":"8Gi","pods":"10"},
                       "conditions":[{"type":"Ready","status":"True"}]}})");
      BOOST_REQUIRE(store.Create("nodes", "", std::move(*node)).ok());
      store.RegisterKubelet(n);
    }
  }
  ObjectPtr Get(const char* resource, const char* ns, const char* name) {
    auto r = store.Get(resource, ns, name);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  }
  std::string Condition(const rapidjson::Value& obj, const std::string& type,
                        const char* field = "status") {
    const rapidjson::Value* conds = Find(obj, "status.conditions");
    if (conds == nullptr)
      return "";
    for (const auto& c : conds->GetArray()) {
      if (GetString(c, "type") == type)
        return GetString(c, field);
    }
    return "";
  }
  void BoundPod(const char* name, const std::string& extra_metadata = "") {
    auto pod = Json(std::string(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")") + name +
                    "\"" + extra_metadata +
                    R"(},"spec":{"nodeName":"node-0","containers":[{"name":"c","image":"busybox",
                    "command":["sleep","1000"]}]}})");
    auto r = store.Create("pods", "default", std::move(*pod));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
};

BOOST_FIXTURE_TEST_SUITE(kubelet_faults, KubeletFixture)

BOOST_AUTO_TEST_CASE(node_not_ready_looks_like_the_node_lifecycle_controller) {
  BoundPod("p");
  BOOST_REQUIRE(kubelet.SetNodeNotReady("node-0").ok());
  ObjectPtr node = Get("nodes", "", "node-0");
  BOOST_CHECK_EQUAL(Condition(*node, "Ready"), "Unknown");
  BOOST_CHECK_EQUAL(Condition(*node, "Ready", "reason"), "NodeStatusUnknown");
  BOOST_CHECK_EQUAL(Condition(*node, "Ready", "message"), "Kubelet stopped posting node status.");
  const rapidjson::Value* taints = Find(*node, "spec.taints");
  BOOST_REQUIRE(taints != nullptr && taints->IsArray());
  BOOST_CHECK_EQUAL(taints->Size(), 2u);
  BOOST_CHECK_EQUAL(GetString((*taints)[0], "key"), "node.kubernetes.io/unreachable");
  BOOST_CHECK_EQUAL(Condition(*Get("pods", "default", "p"), "Ready"), "False");

  // The scheduler now sees the node's taints.
  auto pod = Json(R"({"metadata":{"name":"q","namespace":"default"},"spec":{"containers":[]}})");
  ClusterView view;
  view.nodes.push_back(node.get());
  BOOST_CHECK_EQUAL(Schedule(*pod, view).message,
                    "0/1 nodes are available: 1 node(s) had untolerated taint "
                    "{node.kubernetes.io/unreachable: }.");

  BOOST_REQUIRE(kubelet.SetNodeReady("node-0").ok());
  node = Get("nodes", "", "node-0");
  BOOST_CHECK_EQUAL(Condition(*node, "Ready"), "True");
  BOOST_CHECK_EQUAL(Find(*node, "spec.taints")->Size(), 0u);
  BOOST_CHECK(!kubelet.SetNodeNotReady("node-9").ok());
}

BOOST_AUTO_TEST_CASE(evict_sets_disruption_target_then_deletes_with_grace) {
  BoundPod("p");
  BOOST_REQUIRE(kubelet.EvictPod("default", "p", 7).ok());
  ObjectPtr pod = Get("pods", "default", "p");  // still there: node-0's kubelet must finish
  BOOST_CHECK_EQUAL(Condition(*pod, "DisruptionTarget"), "True");
  BOOST_CHECK_EQUAL(Condition(*pod, "DisruptionTarget", "reason"), "EvictionByEvictionAPI");
  BOOST_CHECK(Find(*pod, "metadata.deletionTimestamp") != nullptr);
  BOOST_CHECK_EQUAL(Find(*pod, "metadata.deletionGracePeriodSeconds")->GetInt64(), 7);
  BOOST_CHECK(!kubelet.EvictPod("default", "nope", std::nullopt).ok());
}

BOOST_AUTO_TEST_CASE(fail_start_annotation_fails_the_pod) {
  BoundPod("p", R"(,"annotations":{"kubesim.k8sbridge.io/fail-start":"image pull refused"})");
  kubelet.Tick();
  ObjectPtr pod = Get("pods", "default", "p");
  BOOST_CHECK_EQUAL(GetString(*pod, "status.phase"), "Failed");
  const rapidjson::Value* term = Find(*pod, "status.containerStatuses");
  BOOST_REQUIRE(term != nullptr && term->IsArray() && term->Size() == 1);
  BOOST_CHECK_EQUAL(GetString((*term)[0], "state.terminated.reason"), "StartError");
  BOOST_CHECK_EQUAL(GetString((*term)[0], "state.terminated.message"), "image pull refused");
  BOOST_CHECK_EQUAL(Find((*term)[0], "state.terminated.exitCode")->GetInt(), 128);
  // A failed pod is not started again, and its delete is immediate.
  const uint64_t rv = store.CurrentResourceVersion();
  kubelet.Tick();
  BOOST_CHECK_EQUAL(store.CurrentResourceVersion(), rv);
}

BOOST_AUTO_TEST_CASE(a_container_without_command_cannot_start) {
  auto pod = Json(R"({"metadata":{"name":"p"},"spec":{"nodeName":"node-1",
      "containers":[{"name":"c","image":"nginx"}]}})");
  BOOST_REQUIRE(store.Create("pods", "default", std::move(*pod)).ok());
  kubelet.Tick();
  ObjectPtr p = Get("pods", "default", "p");
  BOOST_CHECK_EQUAL(GetString(*p, "status.phase"), "Failed");
  BOOST_CHECK(GetString((*Find(*p, "status.containerStatuses"))[0], "state.terminated.message")
                  .find("give the container a command") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cordon_and_taint_helpers) {
  BOOST_REQUIRE(kubelet.CordonNode("node-1", true).ok());
  BOOST_CHECK(Find(*Get("nodes", "", "node-1"), "spec.unschedulable")->GetBool());
  BOOST_REQUIRE(kubelet.CordonNode("node-1", false).ok());
  BOOST_CHECK(Find(*Get("nodes", "", "node-1"), "spec.unschedulable") == nullptr);
  BOOST_REQUIRE(kubelet.AddTaint("node-1", "maint", "yes", "NoSchedule").ok());
  ObjectPtr node = Get("nodes", "", "node-1");
  BOOST_CHECK_EQUAL(GetString((*Find(*node, "spec.taints"))[0], "value"), "yes");
  BOOST_CHECK(!kubelet.AddTaint("node-1", "maint", "yes", "Sometimes").ok());
  BOOST_REQUIRE(kubelet.RemoveTaint("node-1", "maint").ok());
  BOOST_CHECK_EQUAL(Find(*Get("nodes", "", "node-1"), "spec.taints")->Size(), 0u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace kubesim
