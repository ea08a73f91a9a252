// Resume with features: a pod whose features no Kubernetes node can offer fails
// its Slurm node fast (FailNode) instead of waiting for ResumeTimeout.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <mutex>
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
  power::PlacementIndex index("nvidia.com/gpu", nodes, pods);
  for (int round = 0; round < 2; ++round) {
    BOOST_TEST(index.Check(WorkerPod(kH100, 1)).ok());  // w-3: its own GPU on k-1
    BOOST_TEST(index.Check(WorkerPod(kA100, 1)).ok());  // k-0 is free
    Status two = index.Check(WorkerPod(kH100, 2));
    BOOST_TEST(two.message().find("2 have the labels, none has 2 nvidia.com/gpu free") !=
               std::string::npos);
  }
  auto other = WorkerPod(kH100, 1);
  other.SetString("/metadata/name", "w-4");  // no pod of its own: k-1 and k-2 are taken
  BOOST_TEST(!index.Check(other).ok());
  other.SetString("/metadata/namespace", "elsewhere");
  other.SetString("/metadata/name", "w-3");  // w-3 of another namespace is not slurm/w-3
  BOOST_TEST(!index.Check(other).ok());
}

BOOST_AUTO_TEST_CASE(concurrent_checks_get_the_answers_of_one_check) {
  auto nodes = Objects({Node("k-0", kA100, 8), Node("k-1", kH100, 8)});
  power::PlacementIndex index("nvidia.com/gpu", nodes, {});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const bool h100 = (t + i) % 2 == 0;
        const int gpus = (t + i) % 3 == 0 ? 9 : 1;  // 9: more than any node has
        if (index.Check(WorkerPod(h100 ? kH100 : kA100, gpus)).ok() != (gpus == 1))
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
  std::string nodes_json, pods_json = "[]";

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
    nodes_json = "[" + Node("k-0", kH100, 1) + "," + Node("k-1", kH100, 1) + "," +
                 Node("k-2", kA100, 1) + "]";
    client = kube::testing::NoRetryClient(transport, clock, log, "t");
    transport->SetFallback([this](const FakeTransport::Recorded& r) {
      std::lock_guard lock(mu);
      auto list = [](const std::string& items) {
        return FakeTransport::Json(200,
                                   R"({"metadata":{"resourceVersion":"1"},"items":)" + items + "}");
      };
      if (r.method == "GET" && r.url.find("/api/v1/nodes") != std::string::npos)
        return lists_fail ? FakeTransport::Error(Status::Unavailable("refused")) : list(nodes_json);
      // The worker pods of this cluster in Namespace= (what the shipped RBAC grants).
      if (r.method == "GET" &&
          r.url.find("/api/v1/namespaces/slurm/pods?labelSelector=") != std::string::npos)
        return lists_fail ? FakeTransport::Error(Status::Unavailable("refused")) : list(pods_json);
      if (r.method == "POST") {
        created.push_back(r.body);
        return FakeTransport::Json(201, r.body);
      }
      return FakeTransport::Json(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    });
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
  pods_json = "[" + Pod("w-0", "k-0", 1) + "," + Pod("w-1", "k-1", 1) + "]";
  power::PowerContext ctx{setup, *client, slurm, log};
  auto report = power::Resume(ctx, {"w-3"}, Job("w-3", "h100"));
  BOOST_TEST(report.Failed() == 1u);
  BOOST_TEST(created.empty());
  auto failed = slurm.failed();
  BOOST_REQUIRE(failed.count("w-3") == 1u);
  BOOST_TEST(failed["w-3"].rfind("k8sbridge: no Kubernetes node offers features", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(jobs_without_features_are_not_checked) {
  pods_json =
      "[" + Pod("w-0", "k-0", 1) + "," + Pod("w-1", "k-1", 1) + "," + Pod("w-2", "k-2", 1) + "]";
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

BOOST_AUTO_TEST_SUITE_END()
