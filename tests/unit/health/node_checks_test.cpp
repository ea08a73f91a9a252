#include <sys/mount.h>

#include <boost/test/unit_test.hpp>

#include "health_fixture.h"
#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/runner.h"

using namespace k8sbridge::health;

namespace {

void Port(const TempDir& d, const std::string& dev, int port, const std::string& state,
          const std::string& phys, const std::string& rate) {
  std::string base = "ib/" + dev + "/ports/" + std::to_string(port) + "/";
  d.Write(base + "state", state + "\n");
  d.Write(base + "phys_state", phys + "\n");
  d.Write(base + "rate", rate + "\n");
}

HealthConfig IbOnly(const TempDir& d) {
  HealthConfig c;
  c.check_gpus = false;
  c.ib_sysfs_root = (d.path / "ib").string();
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(node_checks)

BOOST_AUTO_TEST_CASE(active_ports_pass) {
  TempDir d;
  Port(d, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  Port(d, "mlx5_1", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  Report r = CheckIbPorts(IbOnly(d));
  BOOST_TEST(r.findings.empty());
  BOOST_TEST(r.observations.size() == 2u);
}

BOOST_AUTO_TEST_CASE(port_down_is_a_hardware_finding) {
  TempDir d;
  Port(d, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  Port(d, "mlx5_1", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)");
  Report r = CheckIbPorts(IbOnly(d));
  BOOST_TEST(DrainReason(r.findings) == "[hardware] k8sbridge-health: mlx5_1 port 1 state 1: DOWN");
}

BOOST_AUTO_TEST_CASE(slow_link_and_polling_phys_state) {
  TempDir d;
  Port(d, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)");
  HealthConfig c = IbOnly(d);
  c.ib_ports.push_back({"mlx5_0", 1, 400});
  BOOST_TEST(
      DrainReason(CheckIbPorts(c).findings) ==
      "[hardware] k8sbridge-health: mlx5_0 port 1 rate 200 Gb/sec (4X HDR), expected 400 Gb/s");
  Port(d, "mlx5_0", 1, "4: ACTIVE", "2: Polling", "400 Gb/sec (4X NDR)");
  BOOST_TEST(DrainReason(CheckIbPorts(c).findings) ==
             "[hardware] k8sbridge-health: mlx5_0 port 1 physical state 2: Polling");
}

BOOST_AUTO_TEST_CASE(configured_device_missing) {
  TempDir d;
  Port(d, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  HealthConfig c = IbOnly(d);
  c.ib_ports.push_back({"mlx5_3", std::nullopt, 0});
  BOOST_TEST(DrainReason(CheckIbPorts(c).findings) ==
             "[hardware] k8sbridge-health: mlx5_3 InfiniBand device mlx5_3 missing");
}

BOOST_AUTO_TEST_CASE(no_infiniband_and_none_configured_is_fine) {
  TempDir d;
  BOOST_TEST(CheckIbPorts(IbOnly(d)).findings.empty());
}

BOOST_AUTO_TEST_CASE(jail_not_mounted_is_a_node_finding) {
  TempDir d;
  std::filesystem::create_directories(d.path / "jail");
  HealthConfig c;
  c.check_gpus = false;
  c.check_ib = false;
  c.jail_path = (d.path / "jail").string();
  HealthState state;
  Report r = RunChecks(c, std::nullopt, state);
  BOOST_TEST(DrainReason(r.findings) == "k8sbridge-health: jail " + c.jail_path + " not mounted");
  c.jail_path = (d.path / "absent").string();
  r = RunChecks(c, std::nullopt, state);
  BOOST_TEST(
      DrainReason(r.findings).starts_with("k8sbridge-health: jail " + c.jail_path + " missing"));
}

BOOST_AUTO_TEST_CASE(free_space_below_minimum) {
  TempDir d;
  HealthConfig c;
  c.check_gpus = false;
  c.check_ib = false;
  c.min_free_gib.emplace_back(d.path.string(), 1e9);  // more than any disk has
  c.min_free_gib.emplace_back(d.path.string(), 0);
  HealthState state;
  Report r = RunChecks(c, std::nullopt, state);
  BOOST_REQUIRE_EQUAL(r.findings.size(), 1u);
  BOOST_TEST(r.findings[0].message.find("expected at least 1e+09") != std::string::npos);
  BOOST_TEST((r.findings[0].severity == Severity::kNode));
}

BOOST_AUTO_TEST_SUITE_END()
