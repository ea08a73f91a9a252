// Labels -> features, changeable features, node_xlate merging, job_valid/job_xlate
// and the sync daemon's relabel update: pure functions over k8sbridge.conf.
#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/features/features.h"
#include "k8sbridge/hostlist.h"

namespace conf = k8sbridge::conf;
namespace kf = k8sbridge::features;

namespace {

conf::BridgeConfig Parse(std::string_view text) {
  auto c =
      conf::ParseBridgeConfig(text, "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  return std::move(*c);
}

const conf::BridgeConfig& Config() {
  static const conf::BridgeConfig c = Parse(R"(
ClusterName=hpc1
FeatureLabelPrefix=feature.node.kubernetes.io/
Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
Feature=a100 Selector=nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB
Feature=ib Selector=feature.node.kubernetes.io/rdma.available=true
Feature=nogpu Selector=!nvidia.com/gpu.product
)");
  return c;
}

auto Changeable() {
  return [](std::string_view f) { return kf::IsChangeable(Config(), f); };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(labels_to_features)

BOOST_AUTO_TEST_CASE(mapping_is_active_when_labels_satisfy_its_selector) {
  kf::Labels labels{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                    {"kubernetes.io/hostname", "node-0"}};
  auto f = kf::FeaturesFromLabels(Config(), labels);
  BOOST_TEST(f.mapped == std::vector<std::string>{"h100"});
  BOOST_TEST(f.passthrough.empty());
}

BOOST_AUTO_TEST_CASE(does_not_exist_selector) {
  auto f = kf::FeaturesFromLabels(Config(), {{"kubernetes.io/hostname", "cpu-0"}});
  BOOST_TEST(f.mapped == std::vector<std::string>{"nogpu"});
}

BOOST_AUTO_TEST_CASE(nfd_labels_pass_through_as_valid_feature_names) {
  kf::Labels labels{{"feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true"},
                    {"feature.node.kubernetes.io/kernel-version.major", "6"},
                    {"feature.node.kubernetes.io/9lives", "true"},
                    {"feature.node.kubernetes.io/rdma.available", "true"},
                    {"feature.node.kubernetes.io/ib", "true"},
                    {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}};
  auto f = kf::FeaturesFromLabels(Config(), labels);
  BOOST_TEST(f.mapped == (std::vector<std::string>{"a100", "ib"}));
  BOOST_TEST(f.passthrough == (std::vector<std::string>{"cpu-cpuid.AVX512F", "rdma.available"}));
  // value not "true", a name Slurm cannot read, a name a Feature= line owns
  BOOST_TEST(f.skipped.size() == 3u);
  BOOST_TEST(kf::JoinFeatures(f.All()) == "a100,ib,cpu-cpuid.AVX512F,rdma.available");
}

BOOST_AUTO_TEST_CASE(pass_through_names) {
  BOOST_TEST(kf::IsPassThroughFeatureName("cpu-cpuid.AVX512F"));
  BOOST_TEST(kf::IsPassThroughFeatureName("_x"));
  BOOST_TEST(!kf::IsPassThroughFeatureName(""));
  BOOST_TEST(!kf::IsPassThroughFeatureName("1gpu"));
  BOOST_TEST(!kf::IsPassThroughFeatureName("a|b"));
  BOOST_TEST(!kf::IsPassThroughFeatureName("a b"));
  BOOST_TEST(!kf::IsPassThroughFeatureName("a&b"));
}

BOOST_AUTO_TEST_CASE(no_prefix_no_pass_through) {
  auto c = Parse("ClusterName=x\nFeature=h100 Selector=gpu=h100\n");
  auto f = kf::FeaturesFromLabels(c, {{"feature.node.kubernetes.io/foo", "true"}, {"gpu", "h100"}});
  BOOST_TEST(kf::JoinFeatures(f.All()) == "h100");
}

BOOST_AUTO_TEST_CASE(invalid_feature_names_are_reported_at_config_load) {
  for (std::string_view bad : {"Feature=a|b Selector=x=y", "Feature=h100,a100 Selector=x=y",
                               "Feature=h100*2 Selector=x=y"}) {
    auto c = conf::ParseBridgeConfig("ClusterName=x\n" + std::string(bad) + "\n",
                                     "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_TEST_INFO(bad);
    BOOST_REQUIRE(!c.ok());
    BOOST_TEST(c.status().message().find("k8sbridge.conf:2") != std::string::npos);
    BOOST_TEST(c.status().message().find("not a Slurm feature name") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(feature_label_settings_parse_and_reject) {
  auto c =
      Parse("ClusterName=x\nFeatureLabelTimeout=500ms\nFeatureCacheFile=/var/spool/%n/l.json\n");
  BOOST_TEST(c.node_features.label_timeout.count() == 500);
  BOOST_TEST(c.node_features.cache_file == "/var/spool/%n/l.json");
  for (std::string_view bad :
       {"FeatureLabelTimeout=0", "FeatureLabelTimeout=5m", "FeatureCacheFile=relative.json"}) {
    auto r = conf::ParseBridgeConfig("ClusterName=x\n" + std::string(bad) + "\n", "/k.conf",
                                     k8sbridge::BuiltinHostlists());
    BOOST_TEST_INFO(bad);
    BOOST_TEST(!r.ok());
  }
}

BOOST_AUTO_TEST_CASE(selector_text_round_trips) {
  auto sel = conf::ParseLabelSelector("a=b,c!=d,e,!f");
  BOOST_REQUIRE(sel.ok());
  BOOST_TEST(kf::SelectorText(*sel) == "a=b,c!=d,e,!f");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(node_xlate)

BOOST_AUTO_TEST_CASE(changeable_features_are_the_mapped_names) {
  BOOST_TEST(kf::IsChangeable(Config(), "h100"));
  BOOST_TEST(!kf::IsChangeable(Config(), "cpu-cpuid.AVX512F"));
  BOOST_TEST(!kf::IsChangeable(Config(), "rack1"));
}

BOOST_AUTO_TEST_CASE(a_boot_needs_a_reboot_only_for_a_changeable_feature) {
  BOOST_TEST(kf::AnyChangeable(Config(), "h100"));
  BOOST_TEST(kf::AnyChangeable(Config(), "rack1&h100"));
  BOOST_TEST(kf::AnyChangeable(Config(), "rack1,h100"));
  BOOST_TEST(!kf::AnyChangeable(Config(), "rack1&cpu-cpuid.AVX512F"));
  BOOST_TEST(!kf::AnyChangeable(Config(), ""));
  // Unparsable: Slurm's own answer without a plugin (a reboot).
  BOOST_TEST(kf::AnyChangeable(Config(), "[rack1"));
}

BOOST_AUTO_TEST_CASE(registration_replaces_changeable_and_keeps_slurm_conf_features) {
  // slurm.conf: Features=rack1,h100,a100; the pod landed on an H100 node.
  BOOST_TEST(kf::MergeNodeFeatures("h100", "rack1,h100,a100", Changeable()) == "h100,rack1");
  BOOST_TEST(kf::MergeNodeFeatures("a100,rdma.available", "rack1,h100", Changeable()) ==
             "a100,rdma.available,rack1");
}

BOOST_AUTO_TEST_CASE(empty_sides) {
  BOOST_TEST(kf::MergeNodeFeatures("", "rack1,h100", Changeable()) == "rack1,h100");
  BOOST_TEST(kf::MergeNodeFeatures("h100,h100", "", Changeable()) == "h100");
}

BOOST_AUTO_TEST_CASE(a_list_without_names_keeps_only_slurm_conf_features) {
  // k8sbridge-power's "," (power::kNoActiveFeatures): no changeable feature active.
  BOOST_TEST(kf::MergeNodeFeatures(",", "rack1,h100,a100", Changeable()) == "rack1");
  BOOST_TEST(kf::MergeNodeFeatures(",", "h100,a100", Changeable()).empty());
}

BOOST_AUTO_TEST_CASE(no_duplicates) {
  BOOST_TEST(kf::MergeNodeFeatures("rack1,h100", "rack1,a100", Changeable()) == "rack1,h100");
}

BOOST_AUTO_TEST_CASE(split_and_join) {
  BOOST_TEST(kf::SplitFeatures(",a,,b,") == (std::vector<std::string>{"a", "b"}));
  BOOST_TEST(kf::SplitFeatures("").empty());
  BOOST_TEST(kf::JoinFeatures({"a", "b", "a", ""}) == "a,b");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(jobs)

BOOST_AUTO_TEST_CASE(plain_and_or_constraints_are_valid) {
  for (std::string_view ok :
       {"", "h100", "h100&rack1", "a100|h100", "(a100|h100)&ib", "rack1*2", "[rack1|rack2]"}) {
    BOOST_TEST_INFO(ok);
    BOOST_TEST(kf::ValidateJobFeatures(Config(), ok).ok());
  }
}

BOOST_AUTO_TEST_CASE(counts_and_matching_or_on_changeable_features_are_refused) {
  for (std::string_view bad : {"h100*2", "[h100|a100]", "rack1&[h100|a100]"}) {
    auto s = kf::ValidateJobFeatures(Config(), bad);
    BOOST_TEST_INFO(bad);
    BOOST_REQUIRE(!s.ok());
    BOOST_TEST(s.message().find("cannot take a count") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(features_no_node_can_have_together_are_refused) {
  auto s = kf::ValidateJobFeatures(Config(), "h100&a100");
  BOOST_REQUIRE(!s.ok());
  BOOST_TEST(s.message().find("nvidia.com/gpu.product") != std::string::npos);
  BOOST_TEST(s.message().find("can never be met") != std::string::npos);
  BOOST_TEST(!kf::ValidateJobFeatures(Config(), "h100&nogpu").ok());
  // One alternative is possible: valid.
  BOOST_TEST(kf::ValidateJobFeatures(Config(), "(h100&a100)|a100").ok());
}

BOOST_AUTO_TEST_CASE(boot_features_are_the_changeable_ones_of_the_first_possible_alternative) {
  BOOST_TEST(kf::BootFeatures(Config(), "h100") == "h100");
  BOOST_TEST(kf::BootFeatures(Config(), "h100&rack1&ib") == "h100,ib");
  BOOST_TEST(kf::BootFeatures(Config(), "a100|h100") == "a100");
  BOOST_TEST(kf::BootFeatures(Config(), "(h100&a100)|a100") == "a100");
  BOOST_TEST(kf::BootFeatures(Config(), "rack1") == "");
  BOOST_TEST(kf::BootFeatures(Config(), "") == "");
  BOOST_TEST(kf::BootFeatures(Config(), "((") == "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(relabel)

BOOST_AUTO_TEST_CASE(a_relabelled_node_swaps_its_label_features_only) {
  kf::Labels before{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                    {"feature.node.kubernetes.io/foo", "true"}};
  kf::Labels after{{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}};
  auto u = kf::RelabelUpdate(Config(), before, after, "h100,foo,rack1", "h100,foo,rack1");
  BOOST_TEST(u.changed);
  BOOST_TEST(u.available == "a100,rack1");
  BOOST_TEST(u.active == "a100,rack1");
}

BOOST_AUTO_TEST_CASE(unrelated_label_changes_send_nothing) {
  kf::Labels before{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"x", "1"}};
  kf::Labels after{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"x", "2"}};
  auto u = kf::RelabelUpdate(Config(), before, after, "rack1,h100", "h100,rack1");
  BOOST_TEST(!u.changed);
}

BOOST_AUTO_TEST_SUITE_END()
