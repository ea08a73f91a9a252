#include <algorithm>
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>
#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/bridge_conf.h"

namespace conf = k8sbridge::conf;
using conf::LabelRequirement;

namespace {

k8sbridge::Result<conf::BridgeConfig> Parse(std::string_view text) {
  return conf::ParseBridgeConfig(text, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
}

// Parses `text` and returns the error message ("" when it parsed).
std::string ErrorOf(std::string_view text) {
  auto r = Parse(text);
  return r.ok() ? "" : r.status().message();
}

constexpr std::string_view kMinimal = "ClusterName=hpc1\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(bridge_conf)

BOOST_AUTO_TEST_CASE(full_example_parses) {
  auto c = Parse(R"(# k8sbridge.conf
ClusterName=hpc1
kubeconfig=/etc/slurm/k8sbridge/kubeconfig KubeContext=prod
NAMESPACE=slurm
QPS=75.5 Burst=150 Concurrency=64
ConnectTimeout=3 RequestTimeout=2500ms RetryDeadline=15s
WorkerCommand=/opt/k8sbridge/bin/k8sbridge-worker
ConfServer=slurmctld.slurm.svc:6817
PlacementLabel=network.k8sbridge.io/leaf PlacementAffinity=preferred
FeatureLabelPrefix=feature.k8sbridge.io/

NodeGroup=gpu Nodes=w-[0-7] PodTemplate=worker.yaml Gpus=8 PlacementAffinity=required
NodeGroup=cpu nodes=cpu[01-04],login-x podtemplate="/etc/slurm/k8sbridge/cpu.yaml" PlacementLabel=topology.kubernetes.io/zone
NodeGroup=solo Nodes=s-0 PodTemplate=/t.yaml PlacementAffinity=none

Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
Feature=ib Selector=feature.node.kubernetes.io/rdma.available==true,!node.kubernetes.io/exclude,zone!=z9,ib-capable
)");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_CHECK_EQUAL(c->cluster_name, "hpc1");
  BOOST_CHECK_EQUAL(c->kube.kubeconfig, "/etc/slurm/k8sbridge/kubeconfig");
  BOOST_CHECK_EQUAL(c->kube.context, "prod");
  BOOST_CHECK(!c->kube.in_cluster);
  BOOST_CHECK_EQUAL(c->kube.namespace_, "slurm");
  BOOST_CHECK_EQUAL(c->kube.qps, 75.5);
  BOOST_CHECK_EQUAL(c->kube.burst, 150);
  BOOST_CHECK_EQUAL(c->kube.concurrency, 64);
  BOOST_CHECK(c->kube.connect_timeout == std::chrono::seconds(3));
  BOOST_CHECK(c->kube.request_timeout == std::chrono::milliseconds(2500));
  BOOST_CHECK(c->kube.retry_deadline == std::chrono::seconds(15));
  BOOST_CHECK_EQUAL(c->worker.command, "/opt/k8sbridge/bin/k8sbridge-worker");
  BOOST_CHECK_EQUAL(c->worker.conf_server, "slurmctld.slurm.svc:6817");
  BOOST_CHECK_EQUAL(c->node_features.label_prefix, "feature.k8sbridge.io/");
  BOOST_REQUIRE_EQUAL(c->node_groups.size(), 3u);

  const conf::NodeGroup& gpu = c->node_groups[0];
  BOOST_CHECK_EQUAL(gpu.name, "gpu");
  BOOST_CHECK_EQUAL(gpu.nodes.size(), 8u);
  BOOST_CHECK_EQUAL(gpu.pod_template, "/etc/slurm/worker.yaml");  // beside the conf
  BOOST_CHECK(gpu.gpus == 8);
  BOOST_CHECK_EQUAL(gpu.placement_label, "network.k8sbridge.io/leaf");        // global default
  BOOST_CHECK(gpu.placement_affinity == conf::PlacementAffinity::kRequired);  // own

  const conf::NodeGroup& cpu = c->node_groups[1];
  BOOST_CHECK_EQUAL(cpu.nodes_expression, "cpu[01-04],login-x");
  BOOST_CHECK(
      (cpu.nodes == std::vector<std::string>{"cpu01", "cpu02", "cpu03", "cpu04", "login-x"}));
  BOOST_CHECK(!cpu.gpus);
  BOOST_CHECK_EQUAL(cpu.placement_label, "topology.kubernetes.io/zone");
  BOOST_CHECK(cpu.placement_affinity == conf::PlacementAffinity::kPreferred);  // global
  BOOST_CHECK(c->node_groups[2].placement_affinity == conf::PlacementAffinity::kNone);

  BOOST_CHECK_EQUAL(c->GroupOf("w-7"), &c->node_groups[0]);
  BOOST_CHECK_EQUAL(c->GroupOf("login-x"), &c->node_groups[1]);
  BOOST_CHECK(c->GroupOf("w-8") == nullptr);

  BOOST_REQUIRE_EQUAL(c->features.size(), 2u);
  BOOST_CHECK(c->MappingOf("h100")->selector ==
              (std::vector<LabelRequirement>{
                  {"nvidia.com/gpu.product", LabelRequirement::Op::kIn, "NVIDIA-H100-80GB-HBM3"}}));
  BOOST_CHECK(c->MappingOf("ib")->selector ==
              (std::vector<LabelRequirement>{
                  {"feature.node.kubernetes.io/rdma.available", LabelRequirement::Op::kIn, "true"},
                  {"node.kubernetes.io/exclude", LabelRequirement::Op::kDoesNotExist, ""},
                  {"zone", LabelRequirement::Op::kNotIn, "z9"},
                  {"ib-capable", LabelRequirement::Op::kExists, ""}}));
  BOOST_CHECK(c->MappingOf("H100") == nullptr);  // features are case-sensitive in Slurm
}

BOOST_AUTO_TEST_CASE(defaults) {
  auto c = Parse(kMinimal);
  BOOST_REQUIRE(c.ok());
  BOOST_CHECK_EQUAL(c->kube.namespace_, "default");
  BOOST_CHECK_EQUAL(c->worker.command, "/usr/sbin/k8sbridge-worker");
  BOOST_CHECK_EQUAL(c->power.gpu_resource, "nvidia.com/gpu");
  BOOST_CHECK_EQUAL(c->kube.qps, 50);
  BOOST_CHECK(c->node_groups.empty());
  auto fast = Parse("ClusterName=a QPS=500");
  BOOST_REQUIRE(fast.ok());
  BOOST_CHECK_EQUAL(fast->kube.burst, 500);
  auto in_cluster = Parse("ClusterName=a InCluster=yes");
  BOOST_REQUIRE(in_cluster.ok());
  BOOST_CHECK(in_cluster->kube.in_cluster);
}

BOOST_AUTO_TEST_CASE(group_of_matches_a_scan_of_every_group_on_many_nodes) {
  // 20,000 nodes in 40 groups of differently shaped names, looked up through the
  // index built at load, in a copy and a moved-to copy too (the index must not point
  // into the original).
  std::string text = "ClusterName=hpc1\n";
  for (int g = 0; g < 40; ++g) {
    text += fmt::format(
        "NodeGroup=g{} Nodes=n{}-[0-399],x{:02}[000-099],s{}y PodTemplate=/t.yaml\n", g, g, g, g);
  }
  auto parsed = Parse(text);
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  conf::BridgeConfig copy = *parsed;
  conf::BridgeConfig moved = std::move(*parsed);
  auto scan = [](const conf::BridgeConfig& c, std::string_view node) -> const conf::NodeGroup* {
    for (const conf::NodeGroup& group : c.node_groups) {
      if (std::find(group.nodes.begin(), group.nodes.end(), node) != group.nodes.end())
        return &group;
    }
    return nullptr;
  };
  size_t found = 0;
  for (const conf::BridgeConfig* c : {&copy, &moved}) {
    for (const conf::NodeGroup& group : c->node_groups) {
      for (const std::string& node : group.nodes) {
        const conf::NodeGroup* got = c->GroupOf(node);
        found += got == &group;
        BOOST_CHECK_MESSAGE(got == scan(*c, node), node);
      }
    }
    for (std::string_view stray : {"n0-400", "x00100", "s40y", "", "n0-", "N0-1", "n0-01"})
      BOOST_CHECK(c->GroupOf(stray) == nullptr);
  }
  BOOST_CHECK_EQUAL(found, 2u * 40u * 501u);
}

BOOST_AUTO_TEST_CASE(a_relative_kubeconfig_is_found_beside_the_conf_file) {
  // As PodTemplate= is: the programs run with whatever current directory Slurm gives.
  auto relative = Parse("ClusterName=a Kubeconfig=k8sbridge/kubeconfig\n");
  BOOST_REQUIRE(relative.ok());
  BOOST_CHECK_EQUAL(relative->kube.kubeconfig, "/etc/slurm/k8sbridge/kubeconfig");
  auto absolute = Parse("ClusterName=a Kubeconfig=/srv/kubeconfig\n");
  BOOST_REQUIRE(absolute.ok());
  BOOST_CHECK_EQUAL(absolute->kube.kubeconfig, "/srv/kubeconfig");
  auto bare = conf::ParseBridgeConfig("ClusterName=a Kubeconfig=kc\n", "k8sbridge.conf",
                                      k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(bare.ok());
  BOOST_CHECK_EQUAL(bare->kube.kubeconfig, "./kc");
  auto empty = Parse("ClusterName=a Kubeconfig=\n");  // as before: not set
  BOOST_REQUIRE(empty.ok());
  BOOST_CHECK_EQUAL(empty->kube.kubeconfig, "");
}

BOOST_AUTO_TEST_CASE(plain_http_to_the_api_server_is_opt_in) {
  auto c = Parse(kMinimal);
  BOOST_REQUIRE(c.ok());
  BOOST_CHECK(!c->kube.allow_insecure_http);
  auto yes = Parse("ClusterName=a AllowInsecureHttp=yes\n");
  BOOST_REQUIRE(yes.ok());
  BOOST_CHECK(yes->kube.allow_insecure_http);
}

BOOST_AUTO_TEST_CASE(unknown_keys_get_a_hint) {
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nNamspace=slurm\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: unknown key 'Namspace': did you mean "
                    "'Namespace'?");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nNodeGroup=g Nodes=w-1 PodTemplte=/t.yaml\n"),
                    "/etc/slurm/k8sbridge.conf:2:23: unknown NodeGroup key 'PodTemplte': did you "
                    "mean 'PodTemplate'?");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nFeature=f Selecter=a=b\n"),
                    "/etc/slurm/k8sbridge.conf:2:11: unknown Feature key 'Selecter': did you mean "
                    "'Selector'?");
  std::string far = ErrorOf("ClusterName=a\nWhatever=1\n");
  BOOST_CHECK_MESSAGE(far.starts_with("/etc/slurm/k8sbridge.conf:2:1: unknown key 'Whatever' "
                                      "(known keys: AllowInsecureHttp, Burst, ClusterName, "
                                      "Concurrency,"),
                      far);
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a Nodes=w-1\n"),
                    "/etc/slurm/k8sbridge.conf:1:15: Nodes: belongs on a NodeGroup= or Feature= "
                    "line, and such a line starts with that key: move it there");
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_field_and_fix) {
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nQPS=fast\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: QPS: 'fast' is not a request rate: use a "
                    "number above 0, e.g. 50");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nBurst=0\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: Burst: 0 is out of range: use 1 to 100000");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nRequestTimeout=soon\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: RequestTimeout: 'soon' is not a duration: "
                    "write seconds (10), or 10s, 500ms or 2m");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a InCluster=maybe"),
                    "/etc/slurm/k8sbridge.conf:1:15: InCluster: 'maybe' is not yes or no");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a Namespace=Slurm"),
                    "/etc/slurm/k8sbridge.conf:1:15: Namespace: 'Slurm' is not a Kubernetes "
                    "namespace name: it has the upper-case letter 'S'; only a-z, 0-9 and '-' are "
                    "allowed");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a WorkerCommand=k8sbridge-worker"),
                    "/etc/slurm/k8sbridge.conf:1:15: WorkerCommand: 'k8sbridge-worker' is not an "
                    "absolute path: give the path of k8sbridge-worker inside the worker image, "
                    "e.g. /usr/sbin/k8sbridge-worker");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a PlacementAffinity=strict"),
                    "/etc/slurm/k8sbridge.conf:1:15: PlacementAffinity: 'strict' is not one of "
                    "required, preferred or none");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a PlacementLabel=\"bad label\""),
                    "/etc/slurm/k8sbridge.conf:1:15: PlacementLabel: 'bad label' is not a "
                    "Kubernetes label key: the name part has the character ' '; only A-Z, a-z, "
                    "0-9, '-', '_' and '.' are allowed");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=\"my cluster\""),
                    "/etc/slurm/k8sbridge.conf:1:1: ClusterName: 'my cluster' cannot be a "
                    "Kubernetes label value (the value has the character ' '; only A-Z, a-z, "
                    "0-9, '-', '_' and '.' are allowed): use slurm.conf's ClusterName, which "
                    "Slurm keeps lower-case");
}

BOOST_AUTO_TEST_CASE(whole_file_rules) {
  BOOST_CHECK_EQUAL(ErrorOf("Namespace=slurm\n"),
                    "/etc/slurm/k8sbridge.conf: ClusterName is not set: add "
                    "ClusterName=<slurm.conf's ClusterName>; it marks the pods this cluster owns");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nQPS=1\nqps=2\n"),
                    "/etc/slurm/k8sbridge.conf:3:1: qps: is already set on line 2: keep one of the "
                    "two");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nKubeconfig=/k\nInCluster=yes\n"),
                    "/etc/slurm/k8sbridge.conf:2: both Kubeconfig= and InCluster=yes (line 3) are "
                    "set: keep one");
  BOOST_CHECK_EQUAL(ErrorOf("ClusterName=a\nQPS=100\nBurst=10\n"),
                    "/etc/slurm/k8sbridge.conf:3: Burst=10 is below QPS=100: set Burst at least "
                    "to QPS");
}

BOOST_AUTO_TEST_CASE(node_group_errors) {
  std::string head(kMinimal);
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=gpu PodTemplate=/t.yaml\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: NodeGroup: node group 'gpu' has no Nodes=: "
                    "add Nodes=<Slurm hostlist>, e.g. Nodes=w-[0-7]");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=gpu Nodes=w-1\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: NodeGroup: node group 'gpu' has no "
                    "PodTemplate=: add PodTemplate=<path of the worker pod template YAML>");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=GPU Nodes=w-1 PodTemplate=/t\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: NodeGroup: 'GPU' cannot name a node group (it "
                    "has the upper-case letter 'G'; only a-z, 0-9 and '-' are allowed): it "
                    "becomes the label k8sbridge.io/node-group; use e.g. NodeGroup=gpu");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=g Nodes=Node[1-2] PodTemplate=/t\n"),
                    "/etc/slurm/k8sbridge.conf:2:13: Nodes: Slurm node name 'Node1' cannot be a "
                    "pod name: it has the upper-case letter 'N'; only a-z, 0-9 and '-' are "
                    "allowed. A worker pod is named after its Slurm node, so rename the node in "
                    "slurm.conf to a DNS-1123 label (lower-case letters, digits and '-')");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=g Nodes=gpu_[1-2] PodTemplate=/t\n"),
                    "/etc/slurm/k8sbridge.conf:2:13: Nodes: Slurm node name 'gpu_1' cannot be a "
                    "pod name: it has the character '_'; only a-z, 0-9 and '-' are allowed. A "
                    "worker pod is named after its Slurm node, so rename the node in slurm.conf "
                    "to a DNS-1123 label (lower-case letters, digits and '-')");
  std::string bad_hostlist = ErrorOf(head + "NodeGroup=g Nodes=w-[3-1] PodTemplate=/t\n");
  BOOST_CHECK_MESSAGE(bad_hostlist.starts_with("/etc/slurm/k8sbridge.conf:2:13: Nodes: "),
                      bad_hostlist);
  BOOST_CHECK_EQUAL(
      ErrorOf(head +
              "NodeGroup=a Nodes=w-[0-3] PodTemplate=/t\nNodeGroup=b Nodes=w-3 PodTemplate=/t\n"),
      "/etc/slurm/k8sbridge.conf:3:13: Nodes: node 'w-3' is already in node group 'a' (line 2): "
      "a node belongs to one group only");
  BOOST_CHECK_EQUAL(
      ErrorOf(head +
              "NodeGroup=a Nodes=w-0 PodTemplate=/t\nNodeGroup=a Nodes=w-1 PodTemplate=/t\n"),
      "/etc/slurm/k8sbridge.conf:3:1: NodeGroup: node group 'a' is already defined on line 2: give "
      "each NodeGroup a different name");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=a Nodes=w-0 Nodes=w-1 PodTemplate=/t\n"),
                    "/etc/slurm/k8sbridge.conf:2:23: Nodes: appears twice on this NodeGroup line: "
                    "keep one");
  BOOST_CHECK_EQUAL(ErrorOf(head + "NodeGroup=a Nodes=w-0 PodTemplate=/t Gpus=many\n"),
                    "/etc/slurm/k8sbridge.conf:2:38: Gpus: 'many' is not a whole number");
}

BOOST_AUTO_TEST_CASE(a_node_groups_runtime_class) {
  std::string head(kMinimal);
  auto c = Parse(head + "NodeGroup=a Nodes=w-0 PodTemplate=/t RuntimeClass=nvidia\n");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_CHECK_EQUAL(c->node_groups[0].runtime_class, "nvidia");
  // A malformed name is refused with the key, what is wrong and the fix.
  BOOST_CHECK_EQUAL(
      ErrorOf(head + "NodeGroup=a Nodes=w-0 PodTemplate=/t RuntimeClass=NVIDIA\n"),
      "/etc/slurm/k8sbridge.conf:2:38: RuntimeClass: 'NVIDIA' cannot name a RuntimeClass (part "
      "'NVIDIA': it has the upper-case letter 'N'; only a-z, 0-9 and '-' are allowed): give the "
      "name of one of the cluster's RuntimeClasses (kubectl get runtimeclass), e.g. "
      "RuntimeClass=nvidia");
  BOOST_CHECK_MESSAGE(
      ErrorOf(head + "NodeGroup=a Nodes=w-0 PodTemplate=/t RuntimeClass=\n")
          .starts_with("/etc/slurm/k8sbridge.conf:2:38: RuntimeClass: '' cannot name a "
                       "RuntimeClass (it is 0 characters long; 1-253 are allowed)"),
      ErrorOf(head + "NodeGroup=a Nodes=w-0 PodTemplate=/t RuntimeClass=\n"));
}

BOOST_AUTO_TEST_CASE(feature_errors) {
  std::string head(kMinimal);
  BOOST_CHECK_EQUAL(ErrorOf(head + "Feature=h100\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: Feature: feature 'h100' has no Selector=: add "
                    "Selector=<label>=<value>, e.g. "
                    "Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3");
  BOOST_CHECK_EQUAL(ErrorOf(head + "Feature=a|b Selector=x=y\n"),
                    "/etc/slurm/k8sbridge.conf:2:1: Feature: 'a|b' is not a Slurm feature name: "
                    "it must be non-empty and have none of & | , * [ ] ( ) ! = : or spaces");
  BOOST_CHECK_EQUAL(ErrorOf(head + "Feature=a Selector=x=y\nFeature=a Selector=x=z\n"),
                    "/etc/slurm/k8sbridge.conf:3:1: Feature: feature 'a' is already mapped on line "
                    "2: keep one mapping (one Selector may hold several requirements, "
                    "comma-separated)");
  BOOST_CHECK_EQUAL(ErrorOf(head + "Feature=a Selector=\"x=two words\"\n"),
                    "/etc/slurm/k8sbridge.conf:2:11: Selector: requirement 'x=two words': 'two "
                    "words' is not a Kubernetes label value (the value has the character ' '; "
                    "only A-Z, a-z, 0-9, '-', '_' and '.' are allowed)");
  BOOST_CHECK_EQUAL(ErrorOf(head + "Feature=a Selector=x=y,,z\n"),
                    "/etc/slurm/k8sbridge.conf:2:11: Selector: requirement '': '' is not a "
                    "Kubernetes label key (the name part is empty)");
}

BOOST_AUTO_TEST_CASE(load_reads_a_file_and_names_a_missing_one) {
  std::string path = "/tmp/k8sbridge-power-test-" + std::to_string(::getpid()) + ".conf";
  {
    std::ofstream out(path);
    out << "ClusterName=c\nNodeGroup=g Nodes=w-[0-1] PodTemplate=w.yaml\n";
  }
  auto c = conf::LoadBridgeConfig(path, k8sbridge::BuiltinHostlists());
  std::remove(path.c_str());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_CHECK_EQUAL(c->node_groups[0].pod_template, "/tmp/w.yaml");
  auto missing =
      conf::LoadBridgeConfig("/nonexistent/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(!missing.ok());
  BOOST_CHECK_EQUAL(missing.status().message(),
                    "cannot read /nonexistent/k8sbridge.conf: No such file or directory; create it "
                    "(see conf-templates/k8sbridge.conf) or set K8SBRIDGE_CONF");
}

BOOST_AUTO_TEST_SUITE_END()
