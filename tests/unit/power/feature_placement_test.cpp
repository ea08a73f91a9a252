// Resume with features: a pod whose features no Kubernetes node can offer fails
// its Slurm node fast (FailNode) instead of waiting for ResumeTimeout.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/hostlist.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/feature_placement.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/text.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace conf = k8sbridge::conf;
namespace kube = k8sbridge::kube;
namespace power = k8sbridge::power;
using k8sbridge::Status;
using kube::FakeTransport;

namespace {

std::string Node(const std::string& name, const std::string& product, int gpus, bool ready = true) {
  return R"({"metadata":{"name":")" + name + R"(","labels":{"nvidia.com/gpu.product":")" + product +
         R"("}},"status":{"allocatable":{"nvidia.com/gpu":")" + std::to_string(gpus) +
         R"("},"conditions":[{"type":"Ready","status":")" + (ready ? "True" : "False") + R"("}]}})";
}

std::string Pod(const std::string& name, const std::string& node, int gpus,
                const std::string& phase = "Running") {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"slurm"},"spec":{"nodeName":")" +
         node + R"(","containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":")" +
         std::to_string(gpus) + R"("}}}]},"status":{"phase":")" + phase + R"("}})";
}

kube::Object WorkerPod(const std::string& product, int gpus) {
  auto p = kube::Object::Parse(
      R"({"metadata":{"name":"w-3","namespace":"slurm","annotations":{"k8sbridge.io/features":"7: h100"}},)"
      R"("spec":{"nodeSelector":{"nvidia.com/gpu.product":")" +
      product + R"("},"containers":[{"name":"slurmd","resources":{"limits":{"nvidia.com/gpu":")" +
      std::to_string(gpus) + R"("}}}]}})");
  BOOST_REQUIRE(p.ok());
  return *p;
}

std::vector<kube::Object> Objects(std::initializer_list<std::string> jsons) {
  std::vector<kube::Object> out;
  for (const std::string& j : jsons) {
    auto o = kube::Object::Parse(j);
    BOOST_REQUIRE(o.ok());
    out.push_back(*o);
  }
  return out;
}

// A search over given lists, as a resume call's over the API.
std::unique_ptr<power::PlacementSearch> Search(std::vector<kube::Object> nodes,
                                               std::vector<kube::Object> pods) {
  power::PlacementReads reads;
  reads.node_page = [nodes](const std::string&,
                            const std::string&) -> k8sbridge::Result<kube::ObjectList> {
    return kube::ObjectList{nodes, "1", ""};
  };
  reads.pods = [pods](const std::string&) -> k8sbridge::Result<std::vector<kube::Object>> {
    return pods;
  };
  return std::make_unique<power::PlacementSearch>("nvidia.com/gpu", std::move(reads));
}

// The value of `key` in `url`'s query, %-decoded ("" when absent).
std::string Query(const std::string& url, const std::string& key) {
  auto q = url.find('?');
  if (q == std::string::npos)
    return "";
  std::string query = "&" + url.substr(q + 1) + "&";
  auto at = query.find("&" + key + "=");
  if (at == std::string::npos)
    return "";
  at += key.size() + 2;
  std::string raw = query.substr(at, query.find('&', at) - at), out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size()) {
      out += static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += raw[i] == '+' ? ' ' : raw[i];
    }
  }
  return out;
}

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";
const std::string kA100 = "NVIDIA-A100-SXM4-80GB";

}  // namespace

BOOST_AUTO_TEST_SUITE(feature_placement)

BOOST_AUTO_TEST_CASE(a_labelled_node_with_free_gpus_is_enough) {
  auto nodes = Objects({Node("k-0", kH100, 1), Node("k-1", kA100, 1)});
  BOOST_TEST(
      power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), nodes, {}).ok());
}

BOOST_AUTO_TEST_CASE(busy_h100_nodes_fail_and_a100_never_counts) {
  auto nodes = Objects({Node("k-0", kH100, 1), Node("k-1", kH100, 1), Node("k-2", kA100, 1)});
  auto pods = Objects({Pod("w-0", "k-0", 1), Pod("w-1", "k-1", 1)});
  Status s = power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), nodes, pods);
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message().find("no Kubernetes node offers features [7: h100]") != std::string::npos);
  BOOST_TEST(s.message().find("2 have the labels, none has 1 nvidia.com/gpu free") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(finished_pods_and_the_nodes_own_pod_do_not_hold_gpus) {
  auto nodes = Objects({Node("k-0", kH100, 1)});
  auto pods = Objects({Pod("old", "k-0", 1, "Succeeded")});
  BOOST_TEST(
      power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), nodes, pods).ok());
  auto own = Objects({Pod("w-3", "k-0", 1)});
  BOOST_TEST(
      power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), nodes, own).ok());
}

BOOST_AUTO_TEST_CASE(no_labelled_or_no_ready_node) {
  auto a100_only = Objects({Node("k-2", kA100, 8)});
  Status s = power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), a100_only, {});
  BOOST_TEST(s.message().find("none has the labels") != std::string::npos);
  auto not_ready = Objects({Node("k-0", kH100, 8, false)});
  s = power::FeaturePlacementPossible("nvidia.com/gpu", WorkerPod(kH100, 1), not_ready, {});
  BOOST_TEST(s.message().find("none is Ready") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(required_node_affinity_terms_are_ored) {
  auto pod = kube::Object::Parse(R"({"metadata":{"name":"w-3"},"spec":{"affinity":{"nodeAffinity":
    {"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
      {"matchExpressions":[{"key":"nvidia.com/gpu.product","operator":"In","values":["X"]}]},
      {"matchExpressions":[{"key":"nvidia.com/gpu.product","operator":"In","values":[")" +
                                 kA100 + R"("]}]}]}}},"containers":[{"name":"c"}]}})");
  BOOST_REQUIRE(pod.ok());
  BOOST_TEST(
      power::FeaturePlacementPossible("nvidia.com/gpu", *pod, Objects({Node("k-2", kA100, 0)}), {})
          .ok());
  BOOST_TEST(
      !power::FeaturePlacementPossible("nvidia.com/gpu", *pod, Objects({Node("k-0", kH100, 8)}), {})
           .ok());
}

BOOST_AUTO_TEST_CASE(one_index_answers_each_placement_and_pod_on_its_own) {
  // Many checks on one index, as a resume call makes them: the nodes an H100 pod
  // matches are remembered, and must not answer for an A100 pod; the GPUs of the
  // node's own pod are its own only on the node it is bound to.
  auto nodes = Objects({Node("k-0", kA100, 1), Node("k-1", kH100, 1), Node("k-2", kH100, 1)});
  auto pods = Objects({Pod("w-3", "k-1", 1), Pod("w-5", "k-2", 1)});
  auto index = Search(nodes, pods);
  for (int round = 0; round < 2; ++round) {
    BOOST_TEST(index->Check(WorkerPod(kH100, 1)).placement.ok());  // w-3: its own GPU on k-1
    BOOST_TEST(index->Check(WorkerPod(kA100, 1)).placement.ok());  // k-0 is free
    Status two = index->Check(WorkerPod(kH100, 2)).placement;
    BOOST_TEST(two.message().find("2 have the labels, none has 2 nvidia.com/gpu free") !=
               std::string::npos);
  }
  auto other = WorkerPod(kH100, 1);
  other.SetString("/metadata/name", "w-4");  // no pod of its own: k-1 and k-2 are taken
  BOOST_TEST(!index->Check(other).placement.ok());
  other.SetString("/metadata/namespace", "elsewhere");
  other.SetString("/metadata/name", "w-3");  // w-3 of another namespace is not slurm/w-3
  BOOST_TEST(!index->Check(other).placement.ok());
}

BOOST_AUTO_TEST_CASE(concurrent_checks_get_the_answers_of_one_check) {
  auto nodes = Objects({Node("k-0", kA100, 8), Node("k-1", kH100, 8)});
  auto index = Search(nodes, {});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const bool h100 = (t + i) % 2 == 0;
        const int gpus = (t + i) % 3 == 0 ? 9 : 1;  // 9: more than any node has
        if (index->Check(WorkerPod(h100 ? kH100 : kA100, gpus)).placement.ok() != (gpus == 1))
          ++wrong;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// An API with fixed nodes and pods that records pod creations.
struct ResumeFixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  std::unique_ptr<kube::Client> client;
  k8sbridge::slurm::RecordingSlurm slurm;
  power::PowerSetup setup;
  std::mutex mu;
  std::vector<std::string> created;
  bool lists_fail = false;
  std::vector<std::string> nodes, pods;  // JSON
  size_t node_page_size = 500;
  std::vector<std::string> node_reads, pod_reads;  // the URLs of the lists asked for

  ResumeFixture() {
    auto c = conf::ParseBridgeConfig(
        "ClusterName=hpc1\nNamespace=slurm\nRetryDeadline=2s\n"
        "NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml Gpus=1\n"
        "Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"
        "Feature=a100 Selector=nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB\n",
        "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE(c.ok());
    setup.config = std::move(*c);
    auto t = power::ParsePodTemplate("spec:\n  containers:\n  - name: slurmd\n    image: x\n",
                                     "/t.yaml");
    BOOST_REQUIRE(t.ok());
    setup.templates.emplace("gpu", std::move(*t));
    nodes = {Node("k-0", kH100, 1), Node("k-1", kH100, 1), Node("k-2", kA100, 1)};
    client = kube::testing::NoRetryClient(transport, clock, log, "t");
    transport->SetFallback([this](const FakeTransport::Recorded& r) {
      std::lock_guard lock(mu);
      if (r.method == "GET" && r.url.find("/api/v1/nodes") != std::string::npos) {
        node_reads.push_back(r.url);
        return lists_fail ? FakeTransport::Error(Status::Unavailable("refused")) : NodePage(r.url);
      }
      // The worker pods of this cluster in Namespace= (what the shipped RBAC grants).
      if (r.method == "GET" &&
          r.url.find("/api/v1/namespaces/slurm/pods?labelSelector=") != std::string::npos) {
        if (r.url.find("replacement") == std::string::npos)  // the placement's reads
          pod_reads.push_back(r.url);
        return lists_fail ? FakeTransport::Error(Status::Unavailable("refused")) : PodList(r.url);
      }
      if (r.method == "POST") {
        created.push_back(r.body);
        return FakeTransport::Json(201, r.body);
      }
      return FakeTransport::Json(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    });
  }

  static FakeTransport::Answer List(const std::vector<std::string>& items,
                                    const std::string& next = "") {
    std::string body =
        R"({"metadata":{"resourceVersion":"1","continue":")" + next + R"("},"items":[)";
    for (size_t i = 0; i < items.size(); ++i)
      body += (i ? "," : "") + items[i];
    return FakeTransport::Json(200, body + "]}");
  }
  // As the API server: the nodes with the labels of the selector's `key=value`
  // parts, node_page_size at a time.
  FakeTransport::Answer NodePage(const std::string& url) const {
    std::vector<std::string> selected;
    const std::string selector = Query(url, "labelSelector");
    for (const std::string& n : nodes) {
      bool all = true;
      for (std::string_view view : k8sbridge::text::Split(selector, ',')) {
        const std::string part(view);
        if (part.empty())
          continue;
        auto eq = part.find('=');
        all = all && eq != std::string::npos &&
              n.find("\"" + part.substr(0, eq) + "\":\"" + part.substr(eq + 1) + "\"") !=
                  std::string::npos;
      }
      if (all)
        selected.push_back(n);
    }
    const std::string cont = Query(url, "continue");
    const size_t from = cont.empty() ? 0 : std::stoul(cont);
    const size_t to = std::min(selected.size(), from + node_page_size);
    return List({selected.begin() + from, selected.begin() + to},
                to < selected.size() ? std::to_string(to) : "");
  }
  // The pods on the node of a `spec.nodeName=` field selector, or every pod.
  FakeTransport::Answer PodList(const std::string& url) const {
    const std::string field = Query(url, "fieldSelector");
    if (field.empty())
      return List(pods);
    BOOST_TEST(field.rfind("spec.nodeName=", 0) == 0u);
    std::vector<std::string> on;
    for (const std::string& p : pods) {
      if (p.find("\"nodeName\":\"" + field.substr(14) + "\"") != std::string::npos)
        on.push_back(p);
    }
    return List(on);
  }

  power::ResumeRequest Job(std::string node, std::string features) {
    power::ResumeRequest request;
    request.all_nodes_resume = {node};
    power::ResumeJob job;
    job.job_id = 7;
    job.features = std::move(features);
    job.nodes_alloc = {node};
    job.nodes_resume = {node};
    request.jobs.push_back(std::move(job));
    return request;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(resume_with_features, ResumeFixture)

BOOST_AUTO_TEST_CASE(free_h100_creates_the_pod) {
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 1u);
  BOOST_TEST(slurm.failed().empty());
}

BOOST_AUTO_TEST_CASE(busy_h100_fails_the_node_fast_with_a_reason) {
  pods = {Pod("w-0", "k-0", 1), Pod("w-1", "k-1", 1)};
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 1u);
  BOOST_TEST(created.empty());
  auto failed = slurm.failed();
  BOOST_REQUIRE(failed.count("w-3") == 1u);
  BOOST_TEST(failed["w-3"].rfind("k8sbridge: no Kubernetes node offers features", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(jobs_without_features_are_not_checked) {
  pods = {Pod("w-0", "k-0", 1), Pod("w-1", "k-1", 1), Pod("w-2", "k-2", 1)};
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", ""));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 1u);
}

BOOST_AUTO_TEST_CASE(unreadable_api_leaves_the_choice_to_kubernetes) {
  lists_fail = true;
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 1u);
  BOOST_TEST(log.Contains("leaving the choice to Kubernetes"));
}

// A resume reads what the check needs, not the cluster: the nodes the features'
// selector selects, one page, and the pods of the first node that fits (the scale
// run: two lists of 10,000 objects a call made k8sbridge no faster than kubectl).
BOOST_AUTO_TEST_CASE(a_resume_reads_one_page_of_selected_nodes_and_one_nodes_pods) {
  power::PowerContext ctx{setup, *client, slurm, log};
  power::ResumeRequest request = Job("w-0", "h100");
  request.all_nodes_resume = {"w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "w-7"};
  request.jobs[0].nodes_alloc = request.all_nodes_resume;
  request.jobs[0].nodes_resume = request.all_nodes_resume;
  auto report = power::Resume(ctx, request.all_nodes_resume, request);
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 8u);
  BOOST_REQUIRE(node_reads.size() == 1u);
  BOOST_TEST(Query(node_reads[0], "labelSelector") == "nvidia.com/gpu.product=" + kH100);
  BOOST_TEST(Query(node_reads[0], "limit") == "50");  // the first node usually fits
  BOOST_REQUIRE(pod_reads.size() == 1u);
  BOOST_TEST(Query(pod_reads[0], "fieldSelector") == "spec.nodeName=k-0");
}

// The first page's nodes are taken: the search reads on, page by page, until a
// node fits.
BOOST_AUTO_TEST_CASE(the_search_reads_further_pages_until_a_node_fits) {
  node_page_size = 1;
  pods = {Pod("w-0", "k-0", 1)};
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 1u);
  BOOST_TEST(node_reads.size() == 2u);  // k-0, then k-1 (k-2 is an A100: not selected)
  BOOST_REQUIRE(pod_reads.size() == 2u);
  BOOST_TEST(Query(pod_reads[1], "fieldSelector") == "spec.nodeName=k-1");
}

// The first node is taken: the next kPodReadBatch nodes' pods are read side by
// side (each read is a round trip, and in a busy cluster most nodes are taken),
// and the search stops at the first of them that fits.
BOOST_AUTO_TEST_CASE(after_the_first_node_the_search_reads_nodes_in_batches) {
  nodes.clear();
  pods.clear();
  for (int i = 0; i < 40; ++i)
    nodes.push_back(Node("k-" + std::to_string(i), kH100, 1));
  for (int i = 0; i < 4; ++i)  // k-4 is the first free node
    pods.push_back(Pod("other-" + std::to_string(i), "k-" + std::to_string(i), 1));
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 0u);
  BOOST_TEST(created.size() == 1u);
  BOOST_REQUIRE(pod_reads.size() == 1u + power::PlacementSearch::kPodReadBatch);
  std::set<std::string> read;
  for (const std::string& url : pod_reads)
    read.insert(Query(url, "fieldSelector"));
  BOOST_TEST(read.size() == pod_reads.size());  // no node read twice
  BOOST_TEST(read.count("spec.nodeName=k-0") == 1u);
  BOOST_TEST(read.count("spec.nodeName=k-8") == 1u);
}

// Every H100 node is taken: the node fails with the count of all of them, and
// after kPerNodePodReads nodes read one by one the rest come from one read of
// every pod, not one read per node.
BOOST_AUTO_TEST_CASE(a_search_over_many_taken_nodes_reads_every_pod_once) {
  nodes.clear();
  pods.clear();
  for (int i = 0; i < 40; ++i) {
    nodes.push_back(Node("k-" + std::to_string(i), kH100, 1));
    pods.push_back(Pod("other-" + std::to_string(i), "k-" + std::to_string(i), 1));
  }
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 1u);
  BOOST_TEST(created.empty());
  BOOST_TEST(slurm.failed()["w-3"].find("40 have the labels, none has 1 nvidia.com/gpu free") !=
             std::string::npos);
  BOOST_REQUIRE(pod_reads.size() ==
                static_cast<size_t>(power::PlacementSearch::kPerNodePodReads) + 1);
  BOOST_TEST(Query(pod_reads.back(), "fieldSelector").empty());
}

BOOST_AUTO_TEST_SUITE_END()
