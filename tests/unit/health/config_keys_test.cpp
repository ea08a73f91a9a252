// The key table of k8sbridge-health.conf (HealthKeyTable): docs/health.md's
// reference table is rendered from it, and its rows word every refusal.
#include <boost/test/unit_test.hpp>

#include "../key_table_checks.h"
#include "k8sbridge/health/config.h"

namespace k8sbridge::health {
namespace {

std::string Error(const std::string& text) {
  auto c = ParseHealthConfig(text, "h.conf");
  return c.ok() ? std::string() : c.status().message();
}

BOOST_AUTO_TEST_SUITE(health_config_keys)

BOOST_AUTO_TEST_CASE(docs_health_md_holds_the_key_table) {
  testing::CheckDocHoldsTable("health.md", HealthKeysMarkdown(), "health/src/config.cpp");
}

BOOST_AUTO_TEST_CASE(every_key_is_named_once_documented_and_refuses_garbage) {
  testing::CheckRowsNamedOnceAndDocumented(HealthKeyTable());
  // An IbPort device is any name the sysfs root may hold.
  testing::CheckRowsRefuseWithAMessage(HealthKeyTable(), {"IbPort"});
  BOOST_TEST(HealthKeys().size() == HealthKeyTable().size());
}

BOOST_AUTO_TEST_CASE(errors_come_from_the_rows) {
  BOOST_TEST(Error("GpuCount=eight") == "h.conf:1:1: GpuCount=eight: expected a number of GPUs");
  BOOST_TEST(Error("ResumeAfterCleanRuns=0") ==
             "h.conf:1:1: ResumeAfterCleanRuns=0: expected a number of runs (1 or more)");
  BOOST_TEST(Error("XidDrain=79,x") ==
             "h.conf:1:1: XidDrain=79,x: expected a comma-separated list of XID numbers");
  BOOST_TEST(Error("MinFreeGiB=/tmp") ==
             "h.conf:1:1: MinFreeGiB=/tmp: expected path:GiB, e.g. /tmp:10");
  BOOST_TEST(Error("KubeConditionType=a/b") ==
             "h.conf:1:1: KubeConditionType=a/b: expected a condition type such as "
             "K8sbridgeHealthProblem");
  BOOST_TEST(Error("TotalTimeout=90s") ==
             "h.conf:1:1: TotalTimeout=90s: '90s' is out of range: give 1ms to 55s: it must stay "
             "under Slurm's 60 s limit for HealthCheckProgram (use 55s or less)");
  BOOST_TEST(Error("CheckTimeout=soon") ==
             "h.conf:1:1: CheckTimeout=soon: 'soon' is not a duration: write seconds (10), or "
             "10s, 500ms or 2m");
}

BOOST_AUTO_TEST_CASE(counts_read_decimal_or_hex) {
  auto c = ParseHealthConfig(
      "GpuCount=0x8 XidDrain=0x4f,,48 EccUncorrectedMax=18446744073709551615 "
      "IbPort=mlx5_1:0x2 XidEventWait=250ms",
      "h.conf");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->gpu_count.value() == 8u);
  BOOST_TEST((c->xid_drain == std::set<unsigned>{48, 79}));
  BOOST_TEST(c->ecc_uncorrected_max == 18446744073709551615ull);
  BOOST_TEST(c->ib_ports.at(0).port.value() == 2u);
  BOOST_TEST(c->xid_event_wait.count() == 250);
  BOOST_TEST(Error("GpuCount=4294967296") ==
             "h.conf:1:1: GpuCount=4294967296: expected a number of GPUs");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::health
