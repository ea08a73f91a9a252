// Node groups pinned to a fabric domain (PlacementDomain=): their Slurm nodes are
// placed by the domain, whether or not a pod of theirs runs.
#include <boost/test/unit_test.hpp>

#include "k8sbridge/topology/model.h"

namespace topo = k8sbridge::topology;

namespace {

const std::string kPrefix = "network.topology.nvidia.com/";
const std::string kLeaf = kPrefix + "leaf";

// Two Kubernetes nodes per leaf, leaf-0 and leaf-1 under spine-0; no Slurm node is
// named after any of them.
std::vector<topo::LabeledNode> KubeNodes() {
  std::vector<topo::LabeledNode> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back({"k-" + std::to_string(i),
                     {{kLeaf, "leaf-" + std::to_string(i / 2)}, {kPrefix + "spine", "spine-0"}}});
  }
  return nodes;
}

std::vector<std::string> Names(const std::string& prefix, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i)
    names.push_back(prefix + std::to_string(i));
  return names;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(domains)

BOOST_AUTO_TEST_CASE(pinned_groups_are_leaves_under_their_domains_switches) {
  std::vector<std::string> slurm = Names("a-", 2);
  for (const std::string& b : Names("b-", 2))
    slurm.push_back(b);
  slurm.push_back("free-0");
  std::vector<topo::DomainGroup> pinned = {{"a", Names("a-", 2), kLeaf, "leaf-0"},
                                           {"b", Names("b-", 2), kLeaf, "leaf-1"}};
  auto match = topo::MatchSlurmNodes(KubeNodes(), slurm, pinned, {});
  BOOST_REQUIRE_MESSAGE(match.ok(), match.status().ToString());
  BOOST_CHECK((match->left_out == std::vector<std::string>{"k-0", "k-1", "k-2", "k-3"}));
  BOOST_CHECK((match->unlabeled == std::vector<std::string>{"free-0"}));
  auto t = topo::TopologyFromLabels(match->nodes, {});
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_CHECK_EQUAL(topo::RenderTreeConf(*t).substr(topo::RenderTreeConf(*t).find("SwitchName")),
                    "SwitchName=cpu-only Nodes=free-0\n"
                    "SwitchName=k8s1-leaf-0 Nodes=a-[0-1]\n"
                    "SwitchName=k8s1-leaf-1 Nodes=b-[0-1]\n"
                    "SwitchName=k8s2-spine-0 Switches=k8s1-leaf-0,k8s1-leaf-1\n");
  std::string blocks = topo::RenderBlockConf(*t);
  BOOST_CHECK(blocks.find("BlockName=k8s1-leaf-0 Nodes=a-[0-1]\nBlockName=k8s1-leaf-1 "
                          "Nodes=b-[0-1]\n") != std::string::npos);
}

// A Kubernetes node named after a pinned Slurm node says nothing about where its pod runs.
BOOST_AUTO_TEST_CASE(the_domain_wins_over_a_kubernetes_node_of_the_same_name) {
  auto nodes = KubeNodes();
  nodes.push_back({"a-0", {{kLeaf, "leaf-1"}, {kPrefix + "spine", "spine-0"}}});
  auto match = topo::MatchSlurmNodes(nodes, {"a-0", "w-0"}, {{"a", {"a-0"}, kLeaf, "leaf-0"}}, {});
  BOOST_REQUIRE_MESSAGE(match.ok(), match.status().ToString());
  auto t = topo::TopologyFromLabels(match->nodes, {});
  BOOST_REQUIRE(t.ok());
  BOOST_CHECK_EQUAL(t->LeafOf("a-0"), "k8s1-leaf-0");
  BOOST_CHECK_EQUAL(t->LeafOf("w-0"), "cpu-only");
}

// Before any Kubernetes node is on the leaf, the leaf is a root of its own; pinned
// nodes outside --nodes are no Slurm nodes.
BOOST_AUTO_TEST_CASE(an_empty_domain_is_a_root_and_only_slurm_nodes_count) {
  auto match =
      topo::MatchSlurmNodes(KubeNodes(), {"c-0"}, {{"c", {"c-0", "c-1"}, kLeaf, "leaf-9"}}, {});
  BOOST_REQUIRE_MESSAGE(match.ok(), match.status().ToString());
  auto t = topo::TopologyFromLabels(match->nodes, {});
  BOOST_REQUIRE(t.ok());
  BOOST_CHECK((t->roots == std::vector<std::string>{"k8s1-leaf-9"}));
  BOOST_CHECK_EQUAL(t->LeafOf("c-0"), "k8s1-leaf-9");
  BOOST_CHECK_EQUAL(t->LeafOf("c-1"), "");
}

BOOST_AUTO_TEST_CASE(errors_name_the_group_and_the_fix) {
  auto zone = topo::MatchSlurmNodes(KubeNodes(), {"z-0"},
                                    {{"z", {"z-0"}, "topology.kubernetes.io/zone", "a"}}, {});
  BOOST_REQUIRE(!zone.ok());
  BOOST_CHECK_EQUAL(zone.status().message(),
                    "node group z is pinned to topology.kubernetes.io/zone=a, but the topology's "
                    "leaves are the values of network.topology.nvidia.com/leaf: pin the group to "
                    "its leaf (PlacementLabel=network.topology.nvidia.com/leaf "
                    "PlacementDomain=<leaf>), or give k8sbridge-topology --label-prefix and "
                    "--label-tiers whose first tier is topology.kubernetes.io/zone");

  auto nodes = KubeNodes();
  nodes[1].labels[kPrefix + "spine"] = "spine-1";
  auto split = topo::MatchSlurmNodes(nodes, {"a-0"}, {{"a", {"a-0"}, kLeaf, "leaf-0"}}, {});
  BOOST_REQUIRE(!split.ok());
  BOOST_CHECK_EQUAL(split.status().message(),
                    "Kubernetes nodes k-0 and k-1 are on leaf network.topology.nvidia.com/"
                    "leaf=leaf-0 but disagree about the switches above it: \"spine-0\" vs "
                    "\"spine-1\"; fix their network.topology.nvidia.com/* labels so that each "
                    "switch has one parent");
}

BOOST_AUTO_TEST_SUITE_END()
