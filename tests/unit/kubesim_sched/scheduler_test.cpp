#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "recording_logger.h"
#include "scheduler.h"
#include "store.h"

namespace kubesim {
namespace {

std::unique_ptr<rapidjson::Document> Json(const std::string& text) {
  auto doc = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(doc.ok(), doc.status().ToString() + " in " + text);
  return std::move(*doc);
}

// A node with 8 GPUs, 64 cpus and 512Gi, labelled with an InfiniBand leaf.
std::string NodeJson(const std::string& name, const std::string& leaf,
                     const std::string& extra_spec = "", const std::string& ready = "True",
                     const std::string& gpus = "8") {
  return fmt::format(
      R"({{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{}","labels":{{
      "kubernetes.io/hostname":"{}","nvidia.com/gpu.product":"H100","ib/leaf":"{}"}}}},
      "spec":{{{}}},"status":{{"allocatable":{{"cpu":"64","memory":"512Gi","pods":"110",
      "nvidia.com/gpu":"{}"}},"conditions":[{{"type":"Ready","status":"{}"}}]}}}})",
      name, name, leaf, extra_spec, gpus, ready);
}

std::string PodJson(const std::string& name, const std::string& requests,
                    const std::string& extra_spec = "", const std::string& labels = "{}",
                    const std::string& node = "") {
  return fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"default",
      "labels":{}}},"spec":{{"nodeName":"{}","containers":[{{"name":"c","image":"x",
      "resources":{{"requests":{{{}}}}}}}]{}}},"status":{{"phase":"Running"}}}})",
      name, labels, node, requests, extra_spec.empty() ? "" : "," + extra_spec);
}

struct Cluster {
  std::vector<std::unique_ptr<rapidjson::Document>> docs;
  ClusterView view;
  void AddNode(const std::string& json) {
    docs.push_back(Json(json));
    view.nodes.push_back(docs.back().get());
  }
  void AddPod(const std::string& json) {
    docs.push_back(Json(json));
    view.pods.push_back(docs.back().get());
  }
};

BOOST_AUTO_TEST_SUITE(quantities)

BOOST_AUTO_TEST_CASE(parses_suffixes_and_rounds_up) {
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("500m"), 500);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("8"), 8000);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("1.5"), 1500);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("4Gi"), 4LL * 1024 * 1024 * 1024 * 1000);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("1k"), 1000 * 1000);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("2e3"), 2000 * 1000);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("100u"), 1);  // rounds up
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("0"), 0);
  BOOST_CHECK_EQUAL(*ParseQuantityMilli("0.1"), 100);
}

BOOST_AUTO_TEST_CASE(rejects_bad_text_naming_it) {
  for (const char* bad : {"", "abc", "4GB", "1e", "m", "1e999", "99999999999999999999Ei"}) {
    Result<int64_t> q = ParseQuantityMilli(bad);
    BOOST_CHECK_MESSAGE(!q.ok(), bad);
    if (!q.ok()) {
      BOOST_CHECK(q.status().message().find(fmt::format("\"{}\"", bad)) != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(pod_requests_sum_containers_and_default_to_limits) {
  auto pod = Json(R"({"spec":{"containers":[
      {"name":"a","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"1","nvidia.com/gpu":"4"}}},
      {"name":"b","resources":{"requests":{"cpu":"250m","memory":"1Gi"}}}],
      "initContainers":[{"name":"i","resources":{"requests":{"cpu":"2"}}}]}})");
  Result<ResourceList> r = PodRequests(*pod);
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK_EQUAL(r->at("cpu"), 2000);  // init container's 2 > 0.75
  BOOST_CHECK_EQUAL(r->at("nvidia.com/gpu"), 4000);
  BOOST_CHECK_EQUAL(r->at("memory"), 1024LL * 1024 * 1024 * 1000);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(filters)

BOOST_AUTO_TEST_CASE(eight_gpu_pod_lands_only_on_node_with_eight_free) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-a"));
  c.AddNode(NodeJson("node-2", "leaf-b"));
  c.AddNode(NodeJson("node-3", "leaf-b"));
  c.AddPod(PodJson("used-0", R"("nvidia.com/gpu":"1")", "", "{}", "node-0"));
  c.AddPod(PodJson("used-1", R"("nvidia.com/gpu":"8")", "", "{}", "node-1"));
  c.AddPod(PodJson("used-3", R"("nvidia.com/gpu":"2")", "", "{}", "node-3"));
  auto pod = Json(PodJson("big", R"("nvidia.com/gpu":"8")"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_REQUIRE(d.node.has_value());
  BOOST_CHECK_EQUAL(*d.node, "node-2");

  // Once it is bound there, the next one fits nowhere.
  c.AddPod(PodJson("big", R"("nvidia.com/gpu":"8")", "", "{}", "node-2"));
  auto next = Json(PodJson("big-2", R"("nvidia.com/gpu":"8")"));
  d = Schedule(*next, c.view);
  BOOST_CHECK(!d.node.has_value());
  BOOST_CHECK_EQUAL(d.message, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.");
}

BOOST_AUTO_TEST_CASE(finished_pods_free_their_resources) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  auto done = Json(PodJson("done", R"("nvidia.com/gpu":"8")", "", "{}", "node-0"));
  (*done)["status"]["phase"].SetString("Succeeded");
  c.view.pods.push_back(done.get());
  auto pod = Json(PodJson("p", R"("nvidia.com/gpu":"8")"));
  BOOST_CHECK(Schedule(*pod, c.view).node.has_value());
}

BOOST_AUTO_TEST_CASE(message_counts_and_sorts_reasons_like_kube_scheduler) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-a"));
  c.AddNode(NodeJson("node-2", "leaf-b", "", "True", "0"));
  c.AddNode(NodeJson("node-3", "leaf-b", "", "True", "0"));
  auto pod = Json(PodJson("p", R"("nvidia.com/gpu":"8","cpu":"100")",
                          R"("nodeSelector":{"ib/leaf":"leaf-b"})"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_CHECK(!d.node.has_value());
  BOOST_CHECK_EQUAL(d.message,
                    "0/4 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu, "
                    "2 node(s) didn't match Pod's node affinity/selector.");
}

BOOST_AUTO_TEST_CASE(node_selector_is_honoured) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-b"));
  auto pod = Json(PodJson("p", "", R"("nodeSelector":{"ib/leaf":"leaf-b"})"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_REQUIRE(d.node);
  BOOST_CHECK_EQUAL(*d.node, "node-1");
}

std::string NodeAffinity(const std::string& expressions) {
  return fmt::format(
      R"("affinity":{{"nodeAffinity":{{"requiredDuringSchedulingIgnoredDuringExecution":{{
      "nodeSelectorTerms":[{}]}}}}}})",
      expressions);
}

BOOST_AUTO_TEST_CASE(required_node_affinity_operators) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-b"));
  auto fits = [&](const std::string& terms) {
    auto pod = Json(PodJson("p", "", NodeAffinity(terms)));
    std::vector<std::string> out;
    for (auto* n : c.view.nodes) {
      if (FilterNode(*pod, *n, c.view).empty())
        out.push_back(GetString(*n, "metadata.name"));
    }
    return fmt::format("{}", fmt::join(out, ","));
  };
  BOOST_CHECK_EQUAL(
      fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"In","values":["leaf-b"]}]})"),
      "node-1");
  BOOST_CHECK_EQUAL(
      fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"NotIn","values":["leaf-b"]}]})"),
      "node-0");
  BOOST_CHECK_EQUAL(fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"Exists"}]})"),
                    "node-0,node-1");
  BOOST_CHECK_EQUAL(fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"DoesNotExist"}]})"),
                    "");
  // Terms are ORed; expressions inside a term ANDed.
  BOOST_CHECK_EQUAL(
      fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"In","values":["leaf-a"]}]},
              {"matchFields":[{"key":"metadata.name","operator":"In","values":["node-1"]}]})"),
      "node-0,node-1");
  BOOST_CHECK_EQUAL(
      fits(R"({"matchExpressions":[{"key":"ib/leaf","operator":"In","values":["leaf-a"]},
                                   {"key":"nvidia.com/gpu.product","operator":"NotIn","values":["H100"]}]})"),
      "");
  BOOST_CHECK_EQUAL(fits(R"({})"), "");  // an empty term matches nothing
}

BOOST_AUTO_TEST_CASE(taints_and_tolerations) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a",
                     R"("taints":[{"key":"gpu","value":"maint","effect":"NoSchedule"}])"));
  c.AddNode(
      NodeJson("node-1", "leaf-a", R"("taints":[{"key":"soft","effect":"PreferNoSchedule"}])"));
  c.AddNode(NodeJson("node-2", "leaf-a", R"("taints":[{"key":"drain","effect":"NoExecute"}])"));
  auto plain = Json(PodJson("p", ""));
  BOOST_CHECK_EQUAL(FilterNode(*plain, *c.view.nodes[0], c.view).at(0),
                    "node(s) had untolerated taint {gpu: maint}");
  BOOST_CHECK(FilterNode(*plain, *c.view.nodes[1], c.view).empty());  // Prefer is ignored
  BOOST_CHECK_EQUAL(FilterNode(*plain, *c.view.nodes[2], c.view).at(0),
                    "node(s) had untolerated taint {drain: }");

  auto equal =
      Json(PodJson("p", "", R"("tolerations":[{"key":"gpu","operator":"Equal","value":"maint"}])"));
  BOOST_CHECK(FilterNode(*equal, *c.view.nodes[0], c.view).empty());
  auto wrong_value = Json(PodJson("p", "", R"("tolerations":[{"key":"gpu","value":"other"}])"));
  BOOST_CHECK(!FilterNode(*wrong_value, *c.view.nodes[0], c.view).empty());
  auto wrong_effect = Json(PodJson(
      "p", "", R"("tolerations":[{"key":"drain","operator":"Exists","effect":"NoSchedule"}])"));
  BOOST_CHECK(!FilterNode(*wrong_effect, *c.view.nodes[2], c.view).empty());
  auto everything = Json(PodJson("p", "", R"("tolerations":[{"operator":"Exists"}])"));
  for (auto* n : c.view.nodes)
    BOOST_CHECK(FilterNode(*everything, *n, c.view).empty());
}

BOOST_AUTO_TEST_CASE(cordoned_and_not_ready_nodes) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a", R"("unschedulable":true)"));
  c.AddNode(NodeJson("node-1", "leaf-a", "", "False"));
  c.AddNode(NodeJson("node-2", "leaf-a", "", "Unknown"));
  auto pod = Json(PodJson("p", ""));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_CHECK(!d.node);
  BOOST_CHECK_EQUAL(d.message,
                    "0/3 nodes are available: 1 node(s) had untolerated taint "
                    "{node.kubernetes.io/not-ready: }, 1 node(s) had untolerated taint "
                    "{node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable.");
  auto tolerant = Json(
      PodJson("p", "",
              R"("tolerations":[{"key":"node.kubernetes.io/unschedulable","operator":"Exists"}])"));
  BOOST_CHECK(FilterNode(*tolerant, *c.view.nodes[0], c.view).empty());
}

BOOST_AUTO_TEST_CASE(cpu_memory_and_pod_count) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddPod(PodJson("a", R"("cpu":"63500m","memory":"500Gi")", "", "{}", "node-0"));
  auto fits = Json(PodJson("p", R"("cpu":"500m","memory":"12Gi")"));
  BOOST_CHECK(FilterNode(*fits, *c.view.nodes[0], c.view).empty());
  auto too_big = Json(PodJson("p", R"("cpu":"501m","memory":"12.5Gi")"));
  std::vector<std::string> reasons = FilterNode(*too_big, *c.view.nodes[0], c.view);
  BOOST_REQUIRE_EQUAL(reasons.size(), 2u);
  BOOST_CHECK_EQUAL(reasons[0], "Insufficient cpu");
  BOOST_CHECK_EQUAL(reasons[1], "Insufficient memory");
}

std::string PodAffinity(const char* kind, const std::string& leaf_label_value) {
  return fmt::format(
      R"("affinity":{{"{}":{{"requiredDuringSchedulingIgnoredDuringExecution":[{{
      "labelSelector":{{"matchExpressions":[{{"key":"group","operator":"In","values":["{}"]}}]}},
      "topologyKey":"ib/leaf"}}]}}}})",
      kind, leaf_label_value);
}

BOOST_AUTO_TEST_CASE(required_pod_affinity_on_infiniband_leaf) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-a"));
  c.AddNode(NodeJson("node-2", "leaf-b"));
  c.AddNode(NodeJson("node-3", "leaf-b"));
  c.AddPod(PodJson("anchor", R"("nvidia.com/gpu":"8")", "", R"({"group":"job-7"})", "node-2"));
  auto pod = Json(PodJson("p", R"("nvidia.com/gpu":"8")", PodAffinity("podAffinity", "job-7"),
                          R"({"group":"job-7"})"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_REQUIRE(d.node);
  BOOST_CHECK_EQUAL(*d.node, "node-3");  // same leaf as the anchor, the only one with room

  // With node-3 full too, the message names both reasons.
  c.AddPod(PodJson("filler", R"("nvidia.com/gpu":"1")", "", "{}", "node-3"));
  d = Schedule(*pod, c.view);
  BOOST_CHECK(!d.node);
  BOOST_CHECK_EQUAL(d.message,
                    "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't "
                    "match pod affinity rules.");
}

BOOST_AUTO_TEST_CASE(first_pod_of_a_self_affine_group_goes_anywhere) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  auto first = Json(PodJson("p", "", PodAffinity("podAffinity", "job-9"), R"({"group":"job-9"})"));
  BOOST_CHECK(Schedule(*first, c.view).node.has_value());
  // A pod that does not match its own term has nothing to follow.
  auto orphan = Json(PodJson("q", "", PodAffinity("podAffinity", "job-9"), R"({"group":"x"})"));
  BOOST_CHECK_EQUAL(Schedule(*orphan, c.view).message,
                    "0/1 nodes are available: 1 node(s) didn't match pod affinity rules.");
}

BOOST_AUTO_TEST_CASE(pod_anti_affinity_both_ways) {
  Cluster c;
  c.AddNode(NodeJson("node-0", "leaf-a"));
  c.AddNode(NodeJson("node-1", "leaf-b"));
  c.AddPod(PodJson("a", "", "", R"({"group":"g"})", "node-0"));
  auto pod = Json(PodJson("p", "", PodAffinity("podAntiAffinity", "g"), R"({"group":"g"})"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_REQUIRE(d.node);
  BOOST_CHECK_EQUAL(*d.node, "node-1");
  BOOST_CHECK_EQUAL(FilterNode(*pod, *c.view.nodes[0], c.view).at(0),
                    "node(s) didn't match pod anti-affinity rules");

  // An existing pod's anti-affinity repels a newcomer that it matches.
  Cluster e;
  e.AddNode(NodeJson("node-0", "leaf-a"));
  e.AddPod(PodJson("a", "", PodAffinity("podAntiAffinity", "g"), R"({"group":"x"})", "node-0"));
  auto newcomer = Json(PodJson("p", "", "", R"({"group":"g"})"));
  BOOST_CHECK_EQUAL(Schedule(*newcomer, e.view).message,
                    "0/1 nodes are available: 1 node(s) didn't satisfy existing pods "
                    "anti-affinity rules.");
}

BOOST_AUTO_TEST_CASE(least_allocated_then_name) {
  Cluster c;
  c.AddNode(NodeJson("node-b", "leaf-a"));
  c.AddNode(NodeJson("node-a", "leaf-a"));
  c.AddNode(NodeJson("node-c", "leaf-a"));
  c.AddPod(PodJson("x", R"("cpu":"8")", "", "{}", "node-a"));
  auto pod = Json(PodJson("p", R"("cpu":"1")"));
  ScheduleDecision d = Schedule(*pod, c.view);
  BOOST_REQUIRE(d.node);
  BOOST_CHECK_EQUAL(*d.node, "node-b");
}

BOOST_AUTO_TEST_CASE(no_nodes) {
  auto pod = Json(PodJson("p", ""));
  BOOST_CHECK_EQUAL(Schedule(*pod, ClusterView{}).message, "0/0 nodes are available:");
}

BOOST_AUTO_TEST_SUITE_END()

// ---- The loop over a real Store --------------------------------------------------------

BOOST_AUTO_TEST_SUITE(loop)

struct StoreFixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  Store store{clock};
  StoreFixture() {
    auto ns = Json(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default"}})");
    auto r = store.Create("namespaces", "", std::move(*ns));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  void Node(const std::string& name, const std::string& leaf) {
    auto r = store.Create("nodes", "", std::move(*Json(NodeJson(name, leaf))));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  void Pod(const std::string& name, const std::string& gpus) {
    auto doc = Json(PodJson(name, fmt::format(R"("nvidia.com/gpu":"{}")", gpus)));
    (*doc)["spec"].RemoveMember("nodeName");
    doc->RemoveMember("status");
    auto r = store.Create("pods", "default", std::move(*doc));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  std::string Condition(const std::string& pod, const std::string& field) {
    auto p = store.Get("pods", "default", pod);
    BOOST_REQUIRE(p.ok());
    const rapidjson::Value* conds = Find(**p, "status.conditions");
    if (conds == nullptr)
      return "";
    for (const auto& c : conds->GetArray()) {
      if (GetString(c, "type") == "PodScheduled")
        return GetString(c, field.c_str());
    }
    return "";
  }
};

BOOST_FIXTURE_TEST_CASE(binds_or_marks_unschedulable_then_retries, StoreFixture) {
  Node("node-0", "leaf-a");
  Node("node-1", "leaf-b");
  Pod("a", "8");
  Pod("b", "8");
  Pod("c", "8");
  Scheduler scheduler(store, log);
  BOOST_CHECK_EQUAL(scheduler.RunOnce(), 2);
  BOOST_CHECK_EQUAL(GetString(**store.Get("pods", "default", "a"), "spec.nodeName"), "node-0");
  BOOST_CHECK_EQUAL(GetString(**store.Get("pods", "default", "b"), "spec.nodeName"), "node-1");
  BOOST_CHECK_EQUAL(GetString(**store.Get("pods", "default", "c"), "spec.nodeName"), "");
  BOOST_CHECK_EQUAL(Condition("c", "status"), "False");
  BOOST_CHECK_EQUAL(Condition("c", "reason"), "Unschedulable");
  BOOST_CHECK_EQUAL(Condition("c", "message"),
                    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.");

  // A FailedScheduling event was recorded, once; a second pass writes nothing new.
  const uint64_t rv = store.CurrentResourceVersion();
  BOOST_CHECK_EQUAL(scheduler.RunOnce(), 0);
  BOOST_CHECK_EQUAL(store.CurrentResourceVersion(), rv);
  int failed_events = 0;
  for (const ObjectPtr& ev : store.List("events", "default").items) {
    if (GetString(*ev, "reason") == "FailedScheduling")
      ++failed_events;
  }
  BOOST_CHECK_EQUAL(failed_events, 1);

  // A third node arrives: c is retried and bound.
  Node("node-2", "leaf-b");
  BOOST_CHECK_EQUAL(scheduler.RunOnce(), 1);
  BOOST_CHECK_EQUAL(GetString(**store.Get("pods", "default", "c"), "spec.nodeName"), "node-2");
  BOOST_CHECK_EQUAL(Condition("c", "status"), "True");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace kubesim
