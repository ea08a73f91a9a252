#include <algorithm>
#include <random>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/topology/model.h"
#include "recording_logger.h"
#include "synthetic_fabric.h"

namespace topo = k8sbridge::topology;
using topo::testing::FabricSpec;

namespace {

topo::FabricGraph Graph(const FabricSpec& spec) {
  auto parsed = topo::ParseIbnetdiscover(topo::testing::SyntheticIbnetdiscover(spec), "synthetic");
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  return std::move(*parsed);
}

topo::Topology Build(const topo::FabricGraph& graph, topo::BuildOptions options = {}) {
  k8sbridge::NullLogger logger;
  auto built = topo::BuildTopology(graph, options, logger);
  BOOST_REQUIRE_MESSAGE(built.ok(), built.status().ToString());
  return std::move(*built);
}

std::vector<const topo::TopoSwitch*> Leaves(const topo::Topology& t) {
  std::vector<const topo::TopoSwitch*> out;
  for (const auto& sw : t.switches) {
    if (!sw.nodes.empty()) {
      out.push_back(&sw);
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(builder)

BOOST_AUTO_TEST_CASE(two_tier_fat_tree) {
  // 2 leaves x 4 hosts, 2 spines.
  auto t = Build(Graph({.hosts = 8, .hosts_per_leaf = 4}));
  auto leaves = Leaves(t);
  BOOST_REQUIRE_EQUAL(leaves.size(), 2u);
  BOOST_CHECK((leaves[0]->nodes == std::vector<std::string>{"w-0", "w-1", "w-2", "w-3"}));
  BOOST_CHECK((leaves[1]->nodes == std::vector<std::string>{"w-4", "w-5", "w-6", "w-7"}));
  BOOST_REQUIRE_EQUAL(t.roots.size(), 1u);
  const auto* root = t.Find(t.roots[0]);
  BOOST_REQUIRE(root);
  BOOST_CHECK_EQUAL(root->tier, 2);
  BOOST_CHECK_EQUAL(root->children.size(), 2u);
  BOOST_CHECK_EQUAL(root->member_guids.size(), 2u);  // both spines fold into one
  BOOST_CHECK_EQUAL(t.LeafOf("w-5"), leaves[1]->name);
  BOOST_CHECK(leaves[0]->name.starts_with("ib1-"));
  BOOST_CHECK(root->name.starts_with("ib2-"));
}

BOOST_AUTO_TEST_CASE(three_tier_fat_tree) {
  // 8 leaves of 2 hosts; pods of 2 leaves with 2 aggregation switches; 2 cores.
  auto t = Build(Graph({.hosts = 16, .hosts_per_leaf = 2, .groups_per_pod = 2}));
  BOOST_CHECK_EQUAL(Leaves(t).size(), 8u);
  int tier2 = 0;
  for (const auto& sw : t.switches) {
    if (sw.tier == 2) {
      ++tier2;
      BOOST_CHECK_EQUAL(sw.children.size(), 2u);
    }
  }
  BOOST_CHECK_EQUAL(tier2, 4);
  BOOST_REQUIRE_EQUAL(t.roots.size(), 1u);
  const auto* root = t.Find(t.roots[0]);
  BOOST_CHECK_EQUAL(root->tier, 3);
  BOOST_CHECK_EQUAL(root->children.size(), 4u);
  BOOST_CHECK(root->name.starts_with("ib3-"));
}

BOOST_AUTO_TEST_CASE(rail_optimised_leaves_of_one_host_group_are_one_leaf) {
  // 4 HCAs per host on 4 rail leaves: every host is under exactly one Slurm leaf.
  auto t = Build(Graph({.hosts = 8, .rails = 4, .hosts_per_leaf = 4}));
  auto leaves = Leaves(t);
  BOOST_REQUIRE_EQUAL(leaves.size(), 2u);
  BOOST_CHECK_EQUAL(leaves[0]->member_guids.size(), 4u);
  std::map<std::string, int> seen;
  for (const auto* leaf : leaves) {
    for (const auto& n : leaf->nodes) {
      ++seen[n];
    }
  }
  BOOST_CHECK_EQUAL(seen.size(), 8u);
  for (const auto& [node, count] : seen) {
    BOOST_CHECK_EQUAL(count, 1);
  }
  BOOST_CHECK_EQUAL(t.attachments.at("w-0").size(), 4u);
  BOOST_CHECK_EQUAL(t.roots.size(), 1u);
}

BOOST_AUTO_TEST_CASE(cpu_only_hosts_get_their_own_root_or_are_excluded) {
  auto graph = Graph({.hosts = 4, .hosts_per_leaf = 4});
  topo::BuildOptions options;
  options.all_nodes = {"w-0", "w-1", "w-2", "w-3", "cpu-0", "cpu-1"};
  options.cpu_only_regex = "w-3";
  auto t = Build(graph, options);
  const auto* cpu = t.Find("cpu-only");
  BOOST_REQUIRE(cpu);
  BOOST_CHECK((cpu->nodes == std::vector<std::string>{"cpu-0", "cpu-1", "w-3"}));
  BOOST_CHECK_EQUAL(t.roots.size(), 2u);
  BOOST_CHECK((Leaves(t)[0]->nodes == std::vector<std::string>{"w-0", "w-1", "w-2"}) ||
              (Leaves(t)[1]->nodes == std::vector<std::string>{"w-0", "w-1", "w-2"}));
  options.cpu_only = topo::CpuOnlyPolicy::kExclude;
  auto excluded = Build(graph, options);
  BOOST_CHECK(!excluded.Find("cpu-only"));
  BOOST_CHECK_EQUAL(excluded.roots.size(), 1u);
  BOOST_CHECK_EQUAL(excluded.LeafOf("cpu-0"), "");
}

BOOST_AUTO_TEST_CASE(separate_fabrics_are_never_joined) {
  auto graph = Graph({.host_prefix = "a-", .hosts = 4, .hosts_per_leaf = 2});
  BOOST_REQUIRE(graph
                    .Merge(Graph({.host_prefix = "b-",
                                  .hosts = 4,
                                  .hosts_per_leaf = 2,
                                  .guid_base = 0x0002c90100000000}))
                    .ok());
  auto t = Build(graph);
  BOOST_REQUIRE_EQUAL(t.roots.size(), 2u);
  for (const auto& root : t.roots) {
    BOOST_CHECK(root.starts_with("ib2-"));
  }
  BOOST_CHECK(t.LeafOf("a-0") != t.LeafOf("b-0"));
  BOOST_CHECK_EQUAL(Leaves(t).size(), 4u);
}

BOOST_AUTO_TEST_CASE(names_do_not_depend_on_input_order) {
  std::string text = topo::testing::SyntheticIbnetdiscover({.hosts = 16, .rails = 2});
  // Shuffle whole records.
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    end = end == std::string::npos ? text.size() : end + 2;
    records.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  std::mt19937 rng(7);
  std::shuffle(records.begin(), records.end(), rng);
  std::string shuffled;
  for (const auto& r : records) {
    shuffled += r;
  }
  auto a = topo::ParseIbnetdiscover(text, "a");
  auto b = topo::ParseIbnetdiscover(shuffled, "b");
  BOOST_REQUIRE(a.ok() && b.ok());
  BOOST_CHECK(topo::RenderTreeConf(Build(*a)) == topo::RenderTreeConf(Build(*b)));
}

BOOST_AUTO_TEST_CASE(host_regex_maps_descriptions) {
  auto graph = Graph({.hosts = 4, .hosts_per_leaf = 4, .hca_word = "HCA-"});
  topo::BuildOptions options;
  options.host_regex = "^w-([0-9]+) HCA";
  auto t = Build(graph, options);
  BOOST_CHECK((Leaves(t)[0]->nodes == std::vector<std::string>{"0", "1", "2", "3"}));
  options.host_regex = "(w)-([0-9])";
  k8sbridge::NullLogger logger;
  auto bad = topo::BuildTopology(graph, options, logger);
  BOOST_REQUIRE(!bad.ok());
  BOOST_CHECK(bad.status().message().find("exactly one") != std::string::npos);
  options.host_regex = "([";
  BOOST_CHECK(!topo::BuildTopology(graph, options, logger).ok());
}

BOOST_AUTO_TEST_CASE(down_hosts_keep_their_place) {
  FabricSpec spec{.hosts = 8, .hosts_per_leaf = 4};
  auto before = Build(Graph(spec));
  // The same fabric with hosts w-4..w-7 gone (their leaf has no host left at all).
  auto nodes = topo::testing::SyntheticNodes(spec);
  std::vector<topo::testing::SynthNode> kept;
  for (auto& n : nodes) {
    kept.push_back(n);
  }
  std::string text = topo::testing::ToIbnetdiscover(kept);
  for (int h = 4; h < 8; ++h) {
    // Drop the CA record and the switch port lines that lead to it.
    std::string desc = fmt::format("\"w-{} mlx5_0\"", h);
    size_t at;
    while ((at = text.find(desc)) != std::string::npos) {
      size_t line_start = text.rfind('\n', at) + 1;
      size_t line_end = text.find('\n', at) + 1;
      if (text.compare(line_start, 2, "Ca") == 0) {
        size_t record_end = text.find("\n\n", line_start);
        size_t record_start = text.rfind("\n\n", line_start) + 2;
        text.erase(record_start, record_end + 2 - record_start);
      } else {
        text.erase(line_start, line_end - line_start);
      }
    }
  }
  auto reduced = topo::ParseIbnetdiscover(text, "reduced");
  BOOST_REQUIRE_MESSAGE(reduced.ok(), reduced.status().ToString());
  auto without_memory = Build(*reduced);
  BOOST_CHECK(topo::RenderTreeConf(without_memory) != topo::RenderTreeConf(before));
  topo::BuildOptions options;
  options.remembered = before.attachments;
  auto with_memory = Build(*reduced, options);
  BOOST_CHECK_EQUAL(topo::RenderTreeConf(with_memory), topo::RenderTreeConf(before));
  // Unless the node is no longer a Slurm node.
  options.all_nodes = {"w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-6"};
  auto forgotten = Build(*reduced, options);
  BOOST_CHECK_EQUAL(forgotten.LeafOf("w-7"), "");
}

BOOST_AUTO_TEST_CASE(unmapped_hcas_are_reported) {
  auto graph = Graph({.hosts = 2, .hosts_per_leaf = 2});
  BOOST_REQUIRE(graph.AddNode({0x99, topo::NodeKind::kCa, 1, ""}).ok());
  k8sbridge::RecordingLogger logger;
  auto t = topo::BuildTopology(graph, {}, logger);
  BOOST_REQUIRE(t.ok());
  BOOST_CHECK(logger.Contains("1 HCA(s) have a node description", k8sbridge::LogLevel::kWarning));
}

BOOST_AUTO_TEST_CASE(bad_options_are_rejected) {
  topo::BuildOptions options;
  options.cpu_only_switch = "bad name";
  BOOST_CHECK(!topo::ValidateOptions(options).ok());
  options.cpu_only_switch = "ibcpu";
  BOOST_CHECK(!topo::ValidateOptions(options).ok());  // clashes with the prefix
  options.cpu_only_switch = "cpu";
  options.switch_prefix = "sw1";
  BOOST_CHECK(!topo::ValidateOptions(options).ok());
}

BOOST_AUTO_TEST_SUITE_END()
