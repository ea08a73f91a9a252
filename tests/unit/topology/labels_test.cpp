#include <boost/test/unit_test.hpp>

#include "k8sbridge/topology/model.h"

namespace topo = k8sbridge::topology;

BOOST_AUTO_TEST_SUITE(labels)

BOOST_AUTO_TEST_CASE(tiered_labels_become_a_tree) {
  const std::string p = "network.topology.nvidia.com/";
  std::vector<topo::LabeledNode> nodes = {
      {"w-0", {{p + "leaf", "l1"}, {p + "spine", "s1"}}},
      {"w-1", {{p + "leaf", "l1"}, {p + "spine", "s1"}}},
      {"w-2", {{p + "leaf", "l2"}, {p + "spine", "s1"}}},
      {"cpu-0", {{"kubernetes.io/hostname", "cpu-0"}}},
  };
  auto t = topo::TopologyFromLabels(nodes, {});
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_CHECK_EQUAL(t->LeafOf("w-0"), "k8s1-l1");
  BOOST_CHECK_EQUAL(t->LeafOf("w-2"), "k8s1-l2");
  BOOST_CHECK_EQUAL(t->LeafOf("cpu-0"), "cpu-only");
  BOOST_CHECK((t->roots == std::vector<std::string>{"cpu-only", "k8s2-s1"}));
  BOOST_CHECK(topo::RenderTreeConf(*t).find("SwitchName=k8s2-s1 Switches=k8s1-l1,k8s1-l2") !=
              std::string::npos);
}

BOOST_AUTO_TEST_CASE(configurable_prefix_and_tiers) {
  topo::LabelOptions options;
  options.prefix = "topology.example.com/";
  options.tiers = {"tier-1", "tier-2"};
  options.cpu_only = topo::CpuOnlyPolicy::kExclude;
  std::vector<topo::LabeledNode> nodes = {
      {"n1", {{"topology.example.com/tier-1", "a"}, {"topology.example.com/tier-2", "b"}}},
      {"n2", {}},
  };
  auto t = topo::TopologyFromLabels(nodes, options);
  BOOST_REQUIRE(t.ok());
  BOOST_CHECK_EQUAL(t->LeafOf("n1"), "k8s1-a");
  BOOST_CHECK_EQUAL(t->LeafOf("n2"), "");
}

BOOST_AUTO_TEST_CASE(inconsistent_or_bad_labels_are_errors) {
  const std::string p = "network.topology.nvidia.com/";
  auto clash = topo::TopologyFromLabels({{"a", {{p + "leaf", "l1"}, {p + "spine", "s1"}}},
                                         {"b", {{p + "leaf", "l1"}, {p + "spine", "s2"}}}},
                                        {});
  BOOST_REQUIRE(!clash.ok());
  BOOST_CHECK(clash.status().message().find("nodes a and b disagree") != std::string::npos);
  BOOST_CHECK(!topo::TopologyFromLabels({{"a", {{p + "leaf", "bad value"}}}}, {}).ok());
}

BOOST_AUTO_TEST_CASE(node_list_json) {
  auto nodes = topo::ParseNodeListJson(
      R"({"kind":"NodeList","items":[{"metadata":{"name":"w-0","labels":{"a":"b"}}},
          {"metadata":{"name":"w-1"}}]})",
      "nodes.json");
  BOOST_REQUIRE_MESSAGE(nodes.ok(), nodes.status().ToString());
  BOOST_REQUIRE_EQUAL(nodes->size(), 2u);
  BOOST_CHECK_EQUAL((*nodes)[0].labels.at("a"), "b");
  BOOST_CHECK(!topo::ParseNodeListJson("{", "x").ok());
  BOOST_CHECK(!topo::ParseNodeListJson(R"({"items":[{"metadata":{}}]})", "x").ok());
  BOOST_CHECK(
      !topo::ParseNodeListJson(R"({"items":[{"metadata":{"name":"a","labels":{"k":1}}}]})", "x")
           .ok());
}

// Slurm nodes are the Kubernetes nodes of the same name; the file never names a node
// slurm.conf lacks (slurmctld would stop on "Invalid node name").
BOOST_AUTO_TEST_CASE(only_slurm_nodes_reach_the_topology) {
  const std::string leaf = "network.topology.nvidia.com/leaf";
  std::vector<topo::LabeledNode> nodes = {
      {"w-1", {{leaf, "l2"}}},
      {"system-0", {{leaf, "l1"}}},
      {"w-0", {{leaf, "l1"}}},
  };
  auto match = topo::MatchSlurmNodes(nodes, {"w-0", "w-1", "w-2"});
  BOOST_CHECK((match.left_out == std::vector<std::string>{"system-0"}));
  BOOST_CHECK((match.unlabeled == std::vector<std::string>{"w-2"}));
  BOOST_REQUIRE_EQUAL(match.nodes.size(), 3u);
  auto t = topo::TopologyFromLabels(match.nodes, {});
  BOOST_REQUIRE(t.ok());
  BOOST_CHECK_EQUAL(t->LeafOf("w-0"), "k8s1-l1");
  BOOST_CHECK_EQUAL(t->LeafOf("w-1"), "k8s1-l2");
  BOOST_CHECK_EQUAL(t->LeafOf("w-2"), "cpu-only");
  BOOST_CHECK_EQUAL(t->LeafOf("system-0"), "");
  BOOST_CHECK(topo::RenderTreeConf(*t).find("system-0") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(without_slurm_nodes_every_kubernetes_node_counts) {
  std::vector<topo::LabeledNode> nodes = {{"b", {}}, {"a", {}}};
  auto match = topo::MatchSlurmNodes(nodes, {});
  BOOST_REQUIRE_EQUAL(match.nodes.size(), 2u);
  BOOST_CHECK_EQUAL(match.nodes[0].name, "a");  // sorted: the same nodes render the same file
  BOOST_CHECK(match.left_out.empty() && match.unlabeled.empty());
}

// The order the API server lists nodes in does not change the file (no churn).
BOOST_AUTO_TEST_CASE(node_order_does_not_change_the_rendering) {
  const std::string p = "network.topology.nvidia.com/";
  std::vector<topo::LabeledNode> nodes = {
      {"w-0", {{p + "leaf", "l1"}, {p + "spine", "s1"}}},
      {"w-1", {{p + "leaf", "l2"}, {p + "spine", "s1"}}},
      {"w-2", {{p + "leaf", "l1"}, {p + "spine", "s1"}}},
  };
  std::vector<topo::LabeledNode> reversed(nodes.rbegin(), nodes.rend());
  auto a = topo::TopologyFromLabels(topo::MatchSlurmNodes(nodes, {}).nodes, {});
  auto b = topo::TopologyFromLabels(topo::MatchSlurmNodes(reversed, {}).nodes, {});
  BOOST_REQUIRE(a.ok() && b.ok());
  BOOST_CHECK_EQUAL(topo::RenderTreeConf(*a), topo::RenderTreeConf(*b));
}

BOOST_AUTO_TEST_SUITE_END()
