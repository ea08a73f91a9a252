// The Sync* keys of k8sbridge.conf: defaults, values and the errors' wording.
#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/bridge_conf.h"

namespace conf = k8sbridge::conf;
using namespace std::chrono_literals;

namespace {
k8sbridge::Result<conf::BridgeConfig> Parse(const std::string& extra) {
  return conf::ParseBridgeConfig("ClusterName=hpc1\n" + extra, "/etc/slurm/k8sbridge.conf",
                                 k8sbridge::BuiltinHostlists());
}
}  // namespace

BOOST_AUTO_TEST_SUITE(sync_conf)

BOOST_AUTO_TEST_CASE(defaults) {
  auto c = Parse("");
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->sync.unschedulable_grace.count() == 20'000);
  BOOST_TEST(c->sync.orphan_grace.count() == 60'000);
  BOOST_TEST(c->sync.breaker_threshold == 3);
  BOOST_TEST(c->sync.lease_name.empty());
  BOOST_TEST(c->sync.lease_duration.count() == 15'000);
  BOOST_TEST(c->sync.metrics_listen == "127.0.0.1:9109");
  BOOST_TEST(c->sync.poll_interval.count() == 500);
  BOOST_TEST(c->sync.max_actions_per_pass == 0);  // auto
}

BOOST_AUTO_TEST_CASE(max_actions_per_pass) {
  BOOST_TEST(Parse("SyncMaxActionsPerPass=50\n")->sync.max_actions_per_pass == 50);
  BOOST_TEST(Parse("SyncMaxActionsPerPass=auto\n")->sync.max_actions_per_pass == 0);
  for (std::string bad : {"0", "-3", "many", "10%"}) {
    auto c = Parse("SyncMaxActionsPerPass=" + bad + "\n");
    BOOST_REQUIRE(!c.ok());
    BOOST_TEST(c.status().message().find("SyncMaxActionsPerPass") != std::string::npos,
               c.status().message());
    BOOST_TEST(c.status().message().find("or auto") != std::string::npos, c.status().message());
  }
}

BOOST_AUTO_TEST_CASE(values) {
  auto c = Parse(
      "SyncHardwareReason='^gpu' SyncUnschedulableGrace=5s SyncOrphanGrace=2m\n"
      "SyncCircuitBreakerThreshold=0 SyncCircuitBreakerCooldown=30s SyncLeaseName=sync-a\n"
      "SyncLeaseDuration=6s SyncMetricsListen=0.0.0.0:9200 SyncPollInterval=250ms\n");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->sync.hardware_reason == "^gpu");
  BOOST_TEST(c->sync.unschedulable_grace.count() == 5'000);
  BOOST_TEST(c->sync.orphan_grace.count() == 120'000);
  BOOST_TEST(c->sync.breaker_threshold == 0);
  BOOST_TEST(c->sync.breaker_cooldown.count() == 30'000);
  BOOST_TEST(c->sync.lease_name == "sync-a");
  BOOST_TEST(c->sync.lease_duration.count() == 6'000);
  BOOST_TEST(c->sync.metrics_listen == "0.0.0.0:9200");
  BOOST_TEST(c->sync.poll_interval.count() == 250);
  BOOST_TEST(Parse("SyncMetricsListen=\"\"\n")->sync.metrics_listen.empty());
}

BOOST_AUTO_TEST_CASE(errors_name_the_key_and_the_fix) {
  auto bad = Parse("SyncHardwareReason='(['\n");
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find("SyncHardwareReason") != std::string::npos);
  BOOST_TEST(bad.status().message().find("not a regular expression") != std::string::npos);
  bad = Parse("SyncMetricsListen=9109\n");
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find("HOST:PORT") != std::string::npos);
  bad = Parse("SyncLeaseDuration=1s\n");
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find("at least 3s") != std::string::npos);
  bad = Parse("SyncLeaseName=Not_A_Name\n");
  BOOST_REQUIRE(!bad.ok());
  bad = Parse("SyncOrphanGrce=1\n");
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find("did you mean 'SyncOrphanGrace'") != std::string::npos,
             bad.status().message());
}

BOOST_AUTO_TEST_SUITE_END()
