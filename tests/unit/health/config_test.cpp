#include <boost/test/unit_test.hpp>

#include "k8sbridge/health/config.h"

using namespace k8sbridge::health;

BOOST_AUTO_TEST_SUITE(health_config)

BOOST_AUTO_TEST_CASE(parses_every_kind_of_key) {
  auto c = ParseHealthConfig(
      "# GPU node\n"
      "GpuCount=8 XidDrain=79,48 PcieMinWidth=16 ThrottleDrainMask=0x48\n"
      "IbPort=mlx5_0:1@400 IbPort=*\n"
      "JailPath=/jail MinFreeGiB=/tmp:10 CheckTimeout=5s TotalTimeout=40s\n"
      "ResumeAfterCleanRuns=3 checknvlink=no\n",
      "health.conf");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->gpu_count.value() == 8u);
  BOOST_TEST((c->xid_drain == std::set<unsigned>{48, 79}));
  BOOST_TEST(c->throttle_drain_mask == 0x48u);
  BOOST_REQUIRE_EQUAL(c->ib_ports.size(), 2u);
  BOOST_TEST(c->ib_ports[0].device == "mlx5_0");
  BOOST_TEST(c->ib_ports[0].port.value() == 1u);
  BOOST_TEST(c->ib_ports[0].min_rate_gbps == 400);
  BOOST_TEST(c->jail_path == "/jail");
  BOOST_TEST(c->min_free_gib[0].first == "/tmp");
  BOOST_TEST((c->check_timeout == std::chrono::seconds(5)));
  BOOST_TEST(c->resume_after_clean_runs == 3u);
  BOOST_TEST(!c->check_nvlink);
}

BOOST_AUTO_TEST_CASE(errors_name_file_line_key_and_fix) {
  auto unknown = ParseHealthConfig("GpuCount=8\nXidDrian=79\n", "/etc/slurm/k8sbridge-health.conf");
  BOOST_TEST(
      unknown.status().message() ==
      "/etc/slurm/k8sbridge-health.conf:2:1: unknown key 'XidDrian' (did you mean 'XidDrain'?); "
      "docs/health.md lists the keys");
  auto bad_bool = ParseHealthConfig("CheckEcc=maybe", "h.conf");
  BOOST_TEST(bad_bool.status().message() == "h.conf:1:1: CheckEcc=maybe: 'maybe' is not yes or no");
  auto too_long = ParseHealthConfig("TotalTimeout=90s", "h.conf");
  BOOST_TEST(too_long.status().message().find("under Slurm's 60 s limit") != std::string::npos);
  auto bad_port = ParseHealthConfig("IbPort=mlx5_0:x", "h.conf");
  BOOST_TEST(bad_port.status().message() ==
             "h.conf:1:1: IbPort=mlx5_0:x: expected device[:port][@Gb/s], e.g. mlx5_0:1@400");
}

// The worker pods' settings (deploy/base/config/k8sbridge-health.conf, mounted
// by the worker pod template): they load, check the jail, and leave Kubernetes
// to k8sbridge-sync, so the worker needs no token.
BOOST_AUTO_TEST_CASE(the_deployed_worker_settings_load) {
  auto c = LoadHealthConfig(K8SBRIDGE_SOURCE_ROOT "/deploy/base/config/k8sbridge-health.conf");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->jail_path == "/jail");
  BOOST_TEST(!c->kube_publish);
  BOOST_TEST(!c->gpu_count.has_value());  // the node's Gres says how many
}

BOOST_AUTO_TEST_SUITE_END()
