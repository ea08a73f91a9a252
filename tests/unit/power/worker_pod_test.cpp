#include <fmt/format.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/test/unit_test.hpp>

#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/worker_pod.h"
#include "recording_logger.h"

namespace conf = k8sbridge::conf;
namespace kube = k8sbridge::kube;
namespace power = k8sbridge::power;
using k8sbridge::LogLevel;
using k8sbridge::RecordingLogger;

namespace {

constexpr std::string_view kConf = R"(
ClusterName=hpc1
Namespace=slurm
ConfServer=ctl:6817
PlacementLabel=network.k8sbridge.io/leaf
NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml
NodeGroup=pref Nodes=p-[0-1] PodTemplate=/t.yaml PlacementAffinity=preferred Gpus=2
NodeGroup=flat Nodes=f-[0-1] PodTemplate=/t.yaml PlacementAffinity=none
NodeGroup=nv Nodes=n-[0-1] PodTemplate=/t.yaml RuntimeClass=nvidia
Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
Feature=a100 Selector=nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB
Feature=ib Selector=feature.node.kubernetes.io/rdma.available=true,!node.example/excluded
)";

constexpr std::string_view kTemplate = R"(
kind: PodTemplate
template:
  metadata:
    labels: {team: hpc}
    annotations: {note: kept}
  spec:
    terminationGracePeriodSeconds: 30
    containers:
    - name: slurmd
      image: registry.example/slurm-worker:24.11
      env:
      - {name: TZ, value: UTC}
      - {name: K8SBRIDGE_NODE_NAME, value: overwritten}
      resources:
        limits: {memory: 64Gi}
)";

struct Fixture {
  Fixture() {
    auto c =
        conf::ParseBridgeConfig(kConf, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    config = std::move(*c);
    auto t = power::ParsePodTemplate(kTemplate, "/t.yaml");
    BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    tmpl = std::move(*t);
  }

  k8sbridge::Result<kube::Object> Render(std::string_view node, std::string gres,
                                         std::vector<const power::ResumeJob*> jobs,
                                         const power::PodTemplate* other = nullptr) {
    power::WorkerPodRequest request;
    request.node = node;
    request.gres = std::move(gres);
    request.jobs = std::move(jobs);
    request.extra_env = {{"K8SBRIDGE_MUNGE_CHECK", "cred"}};
    return power::RenderWorkerPod(config, *config.GroupOf(node), other ? *other : tmpl, request,
                                  log);
  }

  static power::ResumeJob Job(uint32_t id, std::string features, std::vector<std::string> nodes) {
    power::ResumeJob job;
    job.job_id = id;
    job.features = std::move(features);
    job.nodes_alloc = nodes;
    job.nodes_resume = nodes;
    return job;
  }

  conf::BridgeConfig config;
  power::PodTemplate tmpl;
  RecordingLogger log;
};

std::string Json(const kube::Object& o, const char* pointer) {
  const rapidjson::Value* v = rapidjson::Pointer(pointer).Get(o.json());
  if (!v)
    return "<absent>";
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v->Accept(writer);
  return buffer.GetString();
}

kube::Object Pod(std::string_view json) {
  auto o = kube::Object::Parse(json);
  BOOST_REQUIRE_MESSAGE(o.ok(), o.status().ToString());
  return *o;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(worker_pod, Fixture)

BOOST_AUTO_TEST_CASE(single_node_job_full_pod) {
  auto job = Job(12, "h100", {"w-3"});
  auto pod = Render("w-3", "gpu:h100:8(S:0-1)", {&job});
  BOOST_REQUIRE_MESSAGE(pod.ok(), pod.status().ToString());
  BOOST_CHECK_EQUAL(
      pod->ToJson(),
      R"({"metadata":{"labels":{"team":"hpc","app.kubernetes.io/managed-by":"k8sbridge",)"
      R"("k8sbridge.io/cluster":"hpc1","k8sbridge.io/node":"w-3","k8sbridge.io/node-group":"gpu",)"
      R"("k8sbridge.io/job":"12"},"annotations":{"note":"kept","k8sbridge.io/job-ids":"12",)"
      R"("k8sbridge.io/features":"12: h100","k8sbridge.io/template-hash":")" +
          tmpl.hash +
          R"("},"name":"w-3","namespace":"slurm"},)"
          R"("spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"slurmd",)"
          R"("image":"registry.example/slurm-worker:24.11","env":[{"name":"TZ","value":"UTC"},)"
          R"({"name":"K8SBRIDGE_NODE_NAME","value":"w-3"},{"name":"K8SBRIDGE_CLUSTER","value":"hpc1"},)"
          R"({"name":"K8SBRIDGE_NODE_GROUP","value":"gpu"},{"name":"K8SBRIDGE_JOB_IDS","value":"12"},)"
          R"({"name":"K8SBRIDGE_CONF_SERVER","value":"ctl:6817"},)"
          R"({"name":"K8SBRIDGE_POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},)"
          R"({"name":"K8SBRIDGE_POD_NAMESPACE","valueFrom":{"fieldRef":{"fieldPath":"metadata.namespace"}}},)"
          R"({"name":"K8SBRIDGE_POD_IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}},)"
          R"({"name":"K8SBRIDGE_HOST_NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}},)"
          R"({"name":"K8SBRIDGE_MUNGE_CHECK","value":"cred"}],)"
          R"("resources":{"limits":{"memory":"64Gi","nvidia.com/gpu":"8"},"requests":{"nvidia.com/gpu":"8"}},)"
          R"("command":["/usr/sbin/k8sbridge-worker"],"terminationMessagePolicy":"FallbackToLogsOnError"}],)"
          R"("restartPolicy":"Never","automountServiceAccountToken":false,)"
          R"("nodeSelector":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}},)"
          R"("apiVersion":"v1","kind":"Pod"})");
  // A single-node job gets no pod affinity.
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/affinity"), "<absent>");
}

BOOST_AUTO_TEST_CASE(no_automounted_service_account_token_in_a_worker_pod) {
  // The automounted token is mode 0644: a job's stdio (sbatch --input=) and a
  // --no-jail step (allow_no_jail=yes) could otherwise read it.
  auto pod = Render("w-0", "", {});
  BOOST_REQUIRE_MESSAGE(pod.ok(), pod.status().ToString());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/automountServiceAccountToken"), "false");
  auto t = power::ParsePodTemplate(
      "spec:\n  automountServiceAccountToken: false\n  containers: [{name: slurmd, image: w}]\n",
      "/t.yaml");
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  auto explicit_pod = Render("w-0", "", {}, &*t);
  BOOST_REQUIRE(explicit_pod.ok());
  BOOST_CHECK_EQUAL(Json(*explicit_pod, "/spec/automountServiceAccountToken"), "false");
  // A template that turns it on is refused before any pod is rendered
  // (pod_template_test.cpp, a_template_that_turns_the_automounted_token_on_is_refused).
  BOOST_CHECK(!power::ParsePodTemplate(
                   "spec:\n  automountServiceAccountToken: true\n  containers: [{name: slurmd, "
                   "image: w}]\n",
                   "/t.yaml")
                   .ok());
}

BOOST_AUTO_TEST_CASE(a_groups_runtime_class_names_the_pods_runtime) {
  auto pod = Render("n-0", "gpu:8", {});
  BOOST_REQUIRE_MESSAGE(pod.ok(), pod.status().ToString());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/runtimeClassName"), R"("nvidia")");
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/containers/0/resources/limits/nvidia.com~1gpu"), R"("8")");
  // Without one, the template's runtime (here: the cluster's default) stays.
  auto plain = Render("w-0", "gpu:8", {});
  BOOST_REQUIRE(plain.ok());
  BOOST_CHECK_EQUAL(Json(*plain, "/spec/runtimeClassName"), "<absent>");
  // The group's choice replaces a template's.
  auto t = power::ParsePodTemplate(
      "spec:\n  runtimeClassName: kata\n  containers: [{name: slurmd, image: w}]\n", "/t.yaml");
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  auto replaced = Render("n-1", "", {}, &*t);
  BOOST_REQUIRE(replaced.ok());
  BOOST_CHECK_EQUAL(Json(*replaced, "/spec/runtimeClassName"), R"("nvidia")");
  auto kept = Render("w-1", "", {}, &*t);
  BOOST_REQUIRE(kept.ok());
  BOOST_CHECK_EQUAL(Json(*kept, "/spec/runtimeClassName"), R"("kata")");
}

BOOST_AUTO_TEST_CASE(no_jobs_no_gpus_no_constraints) {
  auto pod = Render("w-0", "", {});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"), "<absent>");
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/containers/0/resources"), R"({"limits":{"memory":"64Gi"}})");
  BOOST_CHECK_EQUAL(Json(*pod, "/metadata/labels/k8sbridge.io~1job"), "<absent>");
  BOOST_CHECK_EQUAL(Json(*pod, "/metadata/annotations/k8sbridge.io~1job-ids"), R"("")");
}

BOOST_AUTO_TEST_CASE(or_becomes_node_affinity_terms) {
  auto job = Job(5, "ib&(h100|a100)", {"w-1"});
  auto pod = Render("w-1", "gpu:8", {&job});
  BOOST_REQUIRE_MESSAGE(pod.ok(), pod.status().ToString());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"), "<absent>");
  BOOST_CHECK_EQUAL(
      Json(*pod, "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
      R"({"nodeSelectorTerms":[{"matchExpressions":[)"
      R"({"key":"nvidia.com/gpu.product","operator":"In","values":["NVIDIA-A100-SXM4-80GB"]},)"
      R"({"key":"feature.node.kubernetes.io/rdma.available","operator":"In","values":["true"]},)"
      R"({"key":"node.example/excluded","operator":"DoesNotExist"}]},)"
      R"({"matchExpressions":[)"
      R"({"key":"nvidia.com/gpu.product","operator":"In","values":["NVIDIA-H100-80GB-HBM3"]},)"
      R"({"key":"feature.node.kubernetes.io/rdma.available","operator":"In","values":["true"]},)"
      R"({"key":"node.example/excluded","operator":"DoesNotExist"}]}]})");
}

BOOST_AUTO_TEST_CASE(and_with_non_equality_uses_selector_plus_one_term) {
  auto job = Job(5, "ib", {"w-1"});
  auto pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"),
                    R"({"feature.node.kubernetes.io/rdma.available":"true"})");
  BOOST_CHECK_EQUAL(
      Json(*pod, "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
      R"({"nodeSelectorTerms":[{"matchExpressions":[)"
      R"({"key":"node.example/excluded","operator":"DoesNotExist"}]}]})");
}

BOOST_AUTO_TEST_CASE(only_non_equality_needs_no_node_selector) {
  config.features.push_back(
      {"clean", {{"node.example/excluded", conf::LabelRequirement::Op::kDoesNotExist, ""}}, 0});
  auto job = Job(5, "clean", {"w-1"});
  auto pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"), "<absent>");
  BOOST_CHECK_EQUAL(
      Json(*pod, "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
      R"({"nodeSelectorTerms":[{"matchExpressions":[)"
      R"({"key":"node.example/excluded","operator":"DoesNotExist"}]}]})");
}

BOOST_AUTO_TEST_CASE(template_node_affinity_terms_are_anded_with_ours) {
  auto t = power::ParsePodTemplate(R"(
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: pool, operator: In, values: [hpc]}]
  containers: [{name: slurmd, image: w}]
)",
                                   "/t2.yaml");
  BOOST_REQUIRE(t.ok());
  auto job = Job(5, "h100|a100", {"w-1"});
  auto pod = Render("w-1", "", {&job}, &*t);
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(
      Json(*pod, "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"),
      R"({"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["hpc"]},)"
      R"({"key":"nvidia.com/gpu.product","operator":"In","values":["NVIDIA-A100-SXM4-80GB"]}]},)"
      R"({"matchExpressions":[{"key":"pool","operator":"In","values":["hpc"]},)"
      R"({"key":"nvidia.com/gpu.product","operator":"In","values":["NVIDIA-H100-80GB-HBM3"]}]}]})");
}

BOOST_AUTO_TEST_CASE(unmapped_features_pass_through_or_are_logged) {
  auto job = Job(5, "fast&h100*2", {"w-1"});
  auto pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"), "<absent>");
  BOOST_CHECK(
      log.Contains("node w-1: feature 'fast' has no Feature= mapping: it constrains "
                   "Slurm's choice of node only, not the pod",
                   LogLevel::kDebug));
  BOOST_CHECK(log.Contains("node w-1: job 5: 'h100*2' counts nodes, which one pod cannot check",
                           LogLevel::kWarning));

  config.node_features.label_prefix = "feature.k8sbridge.io/";
  pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"), R"({"feature.k8sbridge.io/fast":"true"})");
}

BOOST_AUTO_TEST_CASE(several_jobs_on_one_node_must_all_be_satisfied) {
  auto a = Job(1, "h100", {"w-1"});
  auto b = Job(2, "ib", {"w-1"});
  auto pod = Render("w-1", "", {&a, &b});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/nodeSelector"),
                    R"({"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3",)"
                    R"("feature.node.kubernetes.io/rdma.available":"true"})");
  BOOST_CHECK_EQUAL(Json(*pod, "/metadata/annotations/k8sbridge.io~1job-ids"), R"("1,2")");
  BOOST_CHECK_EQUAL(Json(*pod, "/metadata/annotations/k8sbridge.io~1features"),
                    R"("1: h100; 2: ib")");
}

BOOST_AUTO_TEST_CASE(contradictions_are_errors) {
  auto job = Job(7, "h100&a100", {"w-1"});
  auto pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(!pod.ok());
  BOOST_CHECK_EQUAL(pod.status().message(),
                    "node w-1: the features of jobs 7 need label nvidia.com/gpu.product to be both "
                    "'NVIDIA-A100-SXM4-80GB' and 'NVIDIA-H100-80GB-HBM3': no Kubernetes node can "
                    "have both; fix the Feature= mappings or the job's --constraint");
  auto t = power::ParsePodTemplate(
      "spec:\n  nodeSelector: {nvidia.com/gpu.product: T4}\n  containers: [{name: s, image: i}]\n",
      "/t3.yaml");
  BOOST_REQUIRE(t.ok());
  auto h100 = Job(8, "h100", {"w-1"});
  pod = Render("w-1", "", {&h100}, &*t);
  BOOST_REQUIRE(!pod.ok());
  BOOST_CHECK_EQUAL(pod.status().message(),
                    "node w-1: pod template /t3.yaml sets spec.nodeSelector.nvidia.com/gpu.product "
                    "to 'T4', but the jobs' features need 'NVIDIA-H100-80GB-HBM3': remove it from "
                    "the template or map the feature differently");
  auto broken = Job(9, "h100&", {"w-1"});
  pod = Render("w-1", "", {&broken});
  BOOST_REQUIRE(!pod.ok());
  BOOST_CHECK_EQUAL(pod.status().message(),
                    "node w-1: job 9: constraint 'h100&': a feature name is missing at position 6");
  pod = Render("w-1", "gpu:x:8K", {});
  BOOST_REQUIRE(!pod.ok());
  BOOST_CHECK_EQUAL(pod.status().message(),
                    "node w-1 (set Gpus= on NodeGroup=gpu to override the Gres): Gres 'gpu:x:8K': "
                    "cannot read a GPU count from 'gpu:x:8K'; expected gpu[:type]:count");
}

BOOST_AUTO_TEST_CASE(multi_node_job_gets_pod_affinity_on_the_placement_label) {
  auto job = Job(30, "", {"w-0", "w-1"});
  auto pod = Render("w-1", "", {&job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/metadata/labels/k8sbridge.io~1job"), R"("30")");
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/affinity/podAffinity"),
                    R"({"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":)"
                    R"({"matchLabels":{"k8sbridge.io/cluster":"hpc1","k8sbridge.io/job":"30"}},)"
                    R"("topologyKey":"network.k8sbridge.io/leaf"}]})");

  auto pref_job = Job(31, "", {"p-0", "p-1"});
  pod = Render("p-0", "gpu:8", {&pref_job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(
      Json(*pod, "/spec/affinity/podAffinity"),
      R"({"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,)"
      R"("podAffinityTerm":{"labelSelector":{"matchLabels":{"k8sbridge.io/cluster":)"
      R"("hpc1","k8sbridge.io/job":"31"}},"topologyKey":"network.k8sbridge.io/leaf"}}]})");
  // Gpus= on the group wins over the Gres.
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/containers/0/resources/requests"),
                    R"({"nvidia.com/gpu":"2"})");

  auto flat_job = Job(32, "", {"f-0", "f-1"});
  pod = Render("f-0", "", {&flat_job});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/affinity"), "<absent>");
}

BOOST_AUTO_TEST_CASE(template_command_is_kept) {
  auto t = power::ParsePodTemplate(
      "spec:\n  containers: [{name: slurmd, image: i, command: [/wrap, k8sbridge-worker]}]\n",
      "/t4.yaml");
  BOOST_REQUIRE(t.ok());
  auto pod = Render("w-0", "", {}, &*t);
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK_EQUAL(Json(*pod, "/spec/containers/0/command"), R"(["/wrap","k8sbridge-worker"])");
}

BOOST_AUTO_TEST_CASE(existing_pods) {
  const std::string owned =
      R"("labels":{"app.kubernetes.io/managed-by":"k8sbridge","k8sbridge.io/cluster":"hpc1",)"
      R"("k8sbridge.io/node":"w-1"})";
  auto judge = [](std::string_view json) {
    return power::JudgeExistingPod(Pod(json), "hpc1", "w-1");
  };

  auto v = judge(R"({"metadata":{"name":"w-1","namespace":"slurm",)" + owned +
                 R"(},"status":{"phase":"Running"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kHealthy);
  BOOST_CHECK_EQUAL(v.reason, "pod slurm/w-1 exists (Running)");
  v = judge(R"({"metadata":{"name":"w-1",)" + owned + "}}");
  BOOST_CHECK(v.action == power::ExistingPod::kHealthy);
  BOOST_CHECK_EQUAL(v.reason, "pod w-1 exists (no status yet)");
  v = judge(R"({"metadata":{"name":"w-1",)" + owned + R"(},"status":{"phase":"Unknown"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kHealthy);

  v = judge(R"({"metadata":{"name":"w-1","deletionTimestamp":"2026-01-01T00:00:00Z",)" + owned +
            R"(},"status":{"phase":"Running"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kReplace);
  BOOST_CHECK_EQUAL(v.reason, "pod w-1 is terminating");
  v = judge(R"({"metadata":{"name":"w-1",)" + owned +
            R"(},"status":{"phase":"Failed","reason":"Evicted","message":"low on memory"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kReplace);
  BOOST_CHECK_EQUAL(v.reason, "pod w-1 has phase Failed (Evicted: low on memory)");
  v = judge(R"({"metadata":{"name":"w-1",)" + owned + R"(},"status":{"phase":"Succeeded"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kReplace);

  v = judge(R"({"metadata":{"name":"w-1","namespace":"slurm"},"status":{"phase":"Failed"}})");
  BOOST_CHECK(v.action == power::ExistingPod::kNotOurs);
  BOOST_CHECK_EQUAL(v.reason,
                    "pod slurm/w-1 already exists and is not k8sbridge's worker for node w-1 of "
                    "cluster hpc1 (it lacks the label app.kubernetes.io/managed-by=k8sbridge); "
                    "k8sbridge never touches such a pod: delete or rename it, or rename the Slurm "
                    "node");
  v = judge(R"({"metadata":{"name":"w-1","labels":{"app.kubernetes.io/managed-by":"k8sbridge",)"
            R"("k8sbridge.io/cluster":"other","k8sbridge.io/node":"w-1"}}})");
  BOOST_CHECK(v.action == power::ExistingPod::kNotOurs);
  BOOST_CHECK(v.reason.find("(it belongs to Slurm cluster 'other')") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ownership_selector_and_check) {
  BOOST_CHECK_EQUAL(power::OwnedPodsSelector("hpc1"),
                    "app.kubernetes.io/managed-by=k8sbridge,k8sbridge.io/cluster=hpc1");
  auto pod = Render("w-2", "", {});
  BOOST_REQUIRE(pod.ok());
  BOOST_CHECK(power::IsOwnedWorkerPod(*pod, "hpc1", "w-2"));
  BOOST_CHECK(!power::IsOwnedWorkerPod(*pod, "hpc2", "w-2"));
  BOOST_CHECK(!power::IsOwnedWorkerPod(*pod, "hpc1", "w-3"));
  // A freshly rendered pod judged as if it came back from the API: ours, healthy.
  BOOST_CHECK(power::JudgeExistingPod(*pod, "hpc1", "w-2").action == power::ExistingPod::kHealthy);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lost_node)

kube::Object NodeWith(const std::string& ready, const std::string& taints = "[]") {
  auto o = kube::Object::Parse(
      R"({"kind":"Node","metadata":{"name":"n-0"},"spec":{"taints":)" + taints +
      R"(},"status":{"conditions":[{"type":"Ready","status":")" + ready +
      R"(","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}})");
  BOOST_REQUIRE(o.ok());
  return *o;
}

BOOST_AUTO_TEST_CASE(a_node_is_lost_when_its_kubelet_stopped_posting) {
  BOOST_TEST(power::NodeLostWhy(NodeWith("Unknown")) ==
             "Ready Unknown: NodeStatusUnknown: Kubelet stopped posting node status.");
  BOOST_TEST(power::NodeLostWhy(NodeWith("False")).empty());  // the kubelet posts
  BOOST_TEST(power::NodeLostWhy(NodeWith("True")).empty());
  BOOST_TEST(power::NodeLostWhy(NodeWith(
                 "True", R"([{"key":"node.kubernetes.io/unreachable","effect":"NoSchedule"}])")) ==
             "taint node.kubernetes.io/unreachable");
}

BOOST_AUTO_TEST_CASE(force_delete_only_when_kubernetes_pod_gc_would) {
  const std::string oos = R"([{"key":"node.kubernetes.io/out-of-service","effect":"NoExecute"}])";
  BOOST_TEST(power::NodeShutDown(nullptr));  // the Node object is gone
  const kube::Object unknown_oos = NodeWith("Unknown", oos);
  const kube::Object ready_oos = NodeWith("True", oos);
  const kube::Object unknown = NodeWith("Unknown");
  BOOST_TEST(power::NodeShutDown(&unknown_oos));
  BOOST_TEST(!power::NodeShutDown(&ready_oos));
  BOOST_TEST(!power::NodeShutDown(&unknown));  // lost, but may still run its pods
}

BOOST_AUTO_TEST_CASE(replacement_names_are_never_another_nodes) {
  BOOST_TEST(power::WorkerPodName("w-3", 0) == "w-3");
  BOOST_TEST(power::WorkerPodName("w-3", 1) == "w-3.1");
  auto pod = kube::Object::Parse(
      R"({"kind":"Pod","metadata":{"name":"w-3.1","labels":{"k8sbridge.io/node":"w-3"},)"
      R"("deletionTimestamp":"2027-01-01T00:00:00Z"},"spec":{"nodeName":"n-0"}})");
  BOOST_REQUIRE(pod.ok());
  BOOST_TEST(power::SlurmNodeOf(*pod) == "w-3");
  const kube::Object unknown = NodeWith("Unknown");
  const kube::Object ready = NodeWith("True");
  BOOST_TEST(power::Stranded(*pod, &unknown));
  BOOST_TEST(power::Stranded(*pod, nullptr));
  BOOST_TEST(!power::Stranded(*pod, &ready));
}

BOOST_AUTO_TEST_SUITE_END()
