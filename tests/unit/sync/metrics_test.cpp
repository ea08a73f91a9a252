// What k8sbridge-sync's endpoint serves, as prometheus-cpp writes it.
#include "metrics.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <prometheus/text_serializer.h>
#include <boost/test/unit_test.hpp>

namespace ks = k8sbridge::sync;
namespace power = k8sbridge::power;

namespace {

std::string Exposition(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

ks::SlurmNode Node(const std::string& name, bool drain, const std::string& reason) {
  ks::SlurmNode n;
  n.name = name;
  n.base = ks::SlurmNode::Base::kIdle;
  n.drain = drain;
  n.reason = reason;
  return n;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics)

BOOST_AUTO_TEST_CASE(health_drains_are_counted_by_their_hardware_tag) {
  ks::World world;
  world.slurm = {
      Node("w-0", true, "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)"),
      Node("w-1", true, "k8sbridge-health: jail /jail not mounted"),
      Node("w-2", true, "[hardware] xid 79 by an admin"),
      Node("w-3", false, "k8sbridge-health: all checks passed"),
      Node("w-4", true, "[hardware] k8sbridge-health: mlx5_1 port 1 state 1: DOWN (+1 more)"),
  };
  prometheus::Registry registry;
  ks::SyncMetrics metrics(registry);
  metrics.Census(world);
  const std::string text = Exposition(registry.Collect());
  BOOST_TEST_MESSAGE(text);
  BOOST_CHECK(Has(text, R"(k8sbridge_health_drained_nodes{hardware="true"} 2)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_health_drained_nodes{hardware="false"} 1)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_sync_slurm_nodes{state="IDLE+DRAIN"} 4)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_sync_api_errors_total{side="slurm"} 0)"));

  // Resumed nodes go back to 0, so a dashboard sees the drain end.
  world.slurm = {Node("w-0", false, "")};
  metrics.Census(world);
  const std::string after = Exposition(registry.Collect());
  BOOST_CHECK(Has(after, R"(k8sbridge_health_drained_nodes{hardware="true"} 0)"));
  BOOST_CHECK(Has(after, R"(k8sbridge_sync_slurm_nodes{state="IDLE+DRAIN"} 0)"));
}

BOOST_AUTO_TEST_CASE(power_counts_are_served_from_the_file) {
  const std::string file = std::filesystem::temp_directory_path() /
                           ("k8sbridge-sync-power-metrics-" + std::to_string(::getpid()));
  ks::PowerMetrics served(file);
  BOOST_CHECK(Has(Exposition(served.Collect()), "k8sbridge_power_metrics_file_readable 1"));

  power::CallOutcome resume{"resume", 3, 1, false, std::chrono::duration<double>(2.5)};
  BOOST_REQUIRE(power::AddPowerCall(file, resume).ok());
  const std::string text = Exposition(served.Collect());
  BOOST_TEST_MESSAGE(text);
  BOOST_CHECK(Has(text, "# TYPE k8sbridge_power_calls_total counter"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_calls_total{subcommand="resume",result="failed"} 1)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_calls_total{subcommand="resume",result="ok"} 0)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_nodes_total{subcommand="resume",result="ok"} 3)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_nodes_total{subcommand="resume",result="failed"} 1)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_call_seconds_count{subcommand="resume"} 1)"));
  BOOST_CHECK(Has(text, R"(k8sbridge_power_call_seconds_sum{subcommand="resume"} 2.5)"));

  std::ofstream(file) << "not the counters\n";
  const std::string broken = Exposition(served.Collect());
  BOOST_CHECK(Has(broken, "k8sbridge_power_metrics_file_readable 0"));
  BOOST_CHECK(broken.find("k8sbridge_power_calls_total") == std::string::npos);
  std::filesystem::remove(file);
  std::filesystem::remove(file + ".lock");
}

BOOST_AUTO_TEST_SUITE_END()
