// power::PlacedFeatures and power::ActiveFeaturesAtResume: which active features a
// resumed node keeps before its pod exists.
#include <boost/test/unit_test.hpp>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/power/resume_features.h"

namespace conf = k8sbridge::conf;
namespace power = k8sbridge::power;

namespace {

conf::BridgeConfig Config() {
  auto c = conf::ParseBridgeConfig(
      "ClusterName=hpc1\n"
      "NodeGroup=gpu Nodes=w-[0-7] PodTemplate=/t.yaml\n"
      "Feature=h100 Selector=nvidia.com/gpu.product=H100\n"
      "Feature=a100 Selector=nvidia.com/gpu.product=A100\n"
      "Feature=ib Selector=feature.node.kubernetes.io/rdma.available=true\n",
      "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  return std::move(*c);
}

std::vector<std::string> Placed(std::vector<std::string> constraints) {
  std::vector<power::ResumeJob> jobs(constraints.size());
  std::vector<const power::ResumeJob*> pointers;
  for (size_t i = 0; i < constraints.size(); ++i) {
    jobs[i].features = constraints[i];
    pointers.push_back(&jobs[i]);
  }
  return power::PlacedFeatures(Config(), pointers);
}

using Names = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(resume_features)

BOOST_AUTO_TEST_CASE(placed_features_are_those_every_alternative_needs) {
  BOOST_TEST(Placed({}).empty());
  BOOST_TEST(Placed({""}).empty());
  BOOST_TEST(Placed({"h100"}) == (Names{"h100"}));
  BOOST_TEST(Placed({"h100&ib"}) == (Names{"h100", "ib"}));
  BOOST_TEST(Placed({"h100,rack1"}) == (Names{"h100"}));  // rack1: not changeable
  BOOST_TEST(Placed({"a100|h100"}).empty());              // the pod may go to either
  BOOST_TEST(Placed({"(a100|h100)&ib"}) == (Names{"ib"}));
  BOOST_TEST(Placed({"h100*2"}).empty());    // a count: not in the pod's placement
  BOOST_TEST(Placed({"h100&(ib"}).empty());  // does not parse
  BOOST_TEST(Placed({"", "ib", "h100&ib"}) == (Names{"ib", "h100"}));  // each job must hold
}

BOOST_AUTO_TEST_CASE(a_job_without_constraint_keeps_no_changeable_feature) {
  // Fresh slurmctld: no active features held, so the available ones count.
  auto change = power::ActiveFeaturesAtResume(Config(), "h100,a100,ib", "", {});
  BOOST_REQUIRE(change.has_value());
  BOOST_TEST(change->active == ",");
  BOOST_TEST(change->dropped == (Names{"h100", "a100", "ib"}));
}

BOOST_AUTO_TEST_CASE(non_changeable_features_stay_active) {
  auto change = power::ActiveFeaturesAtResume(Config(), "h100,a100,rack1", "", {});
  BOOST_REQUIRE(change.has_value());
  BOOST_TEST(change->active == "rack1");
  BOOST_TEST(change->dropped == (Names{"h100", "a100"}));
}

BOOST_AUTO_TEST_CASE(the_placed_features_stay_active) {
  auto change = power::ActiveFeaturesAtResume(Config(), "h100,a100,ib,rack1", "", {"h100"});
  BOOST_REQUIRE(change.has_value());
  BOOST_TEST(change->active == "h100,rack1");
  BOOST_TEST(change->dropped == (Names{"a100", "ib"}));
}

BOOST_AUTO_TEST_CASE(nothing_to_drop_changes_nothing) {
  // Slurm made h100 active for a -C h100 job: the pod is placed on an H100 node.
  BOOST_TEST(!power::ActiveFeaturesAtResume(Config(), "h100,a100", "h100", {"h100"}));
  // Only plain features active (rack1 is not a Feature= name).
  BOOST_TEST(!power::ActiveFeaturesAtResume(Config(), "h100,a100,rack1", "rack1", {}));
  BOOST_TEST(!power::ActiveFeaturesAtResume(Config(), "", "", {}));
}

BOOST_AUTO_TEST_CASE(an_or_constraint_keeps_neither_alternative_active) {
  // -C "a100|h100": Slurm resumed the node into a100 (job_xlate), but the pod may
  // land on an H100 node.
  auto change = power::ActiveFeaturesAtResume(Config(), "h100,a100", "a100", Placed({"a100|h100"}));
  BOOST_REQUIRE(change.has_value());
  BOOST_TEST(change->active == ",");
  BOOST_TEST(change->dropped == (Names{"a100"}));
}

BOOST_AUTO_TEST_SUITE_END()
