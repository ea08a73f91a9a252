// Config path, settings for scontrol show config, version texts.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "k8sbridge/features/plugin_support.h"

namespace kf = k8sbridge::features;

BOOST_AUTO_TEST_CASE(config_path_is_env_else_beside_slurm_conf) {
  BOOST_TEST(kf::PluginConfigPath("/x/k.conf", "/etc/slurm/slurm.conf") == "/x/k.conf");
  BOOST_TEST(kf::PluginConfigPath(nullptr, "/tmp/rig/etc/slurm.conf") ==
             "/tmp/rig/etc/k8sbridge.conf");
  BOOST_TEST(kf::PluginConfigPath("", "slurm.conf") == "/etc/slurm/k8sbridge.conf");
}

// NodeFeaturesPlugins=node_features/k8s is on in every kustomization of deploy/, and
// slurmctld and every worker's slurmd stop when the plugin refuses its k8sbridge.conf
// (an overlay's own, else the base's).
BOOST_AUTO_TEST_CASE(every_deployed_k8sbridge_conf_loads_in_the_plugin) {
  namespace fs = std::filesystem;
  const fs::path deploy = fs::path(K8SBRIDGE_SOURCE_ROOT) / "deploy";
  for (const char* kustomization : {"base", "overlays/demo", "overlays/example-gpu"}) {
    fs::path conf = deploy / kustomization / "config/k8sbridge.conf";
    if (!fs::exists(conf))
      conf = deploy / "base/config/k8sbridge.conf";
    auto config = kf::LoadPluginConfig(conf.string());
    BOOST_TEST(config.ok(), kustomization << ": " << config.status().ToString());
  }
}

BOOST_AUTO_TEST_CASE(load_refuses_bad_names_and_a_conf_without_features) {
  auto dir = std::filesystem::temp_directory_path() /
             ("k8sbridge-plugin-support-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "k8sbridge.conf").string();
  std::ofstream(path) << "ClusterName=x\nFeature=a|b Selector=x=y\n";
  auto bad = kf::LoadPluginConfig(path);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().find(path + ":2") != std::string::npos);
  std::ofstream(path) << "ClusterName=x\n";
  auto empty = kf::LoadPluginConfig(path);
  BOOST_REQUIRE(!empty.ok());
  BOOST_TEST(empty.status().message().find("needs Feature=") != std::string::npos);
  std::ofstream(path) << "ClusterName=x\nFeature=h100 Selector=gpu=h100\n";
  auto good = kf::LoadPluginConfig(path);
  BOOST_REQUIRE(good.ok());
  auto settings = kf::PluginSettings(*good);
  auto has = [&](std::string key, std::string value) {
    for (auto& [k, v] : settings)
      if (k == key && v == value)
        return true;
    return false;
  };
  BOOST_TEST(has("Feature", "h100 Selector=gpu=h100"));
  BOOST_TEST(has("FeatureLabelTimeout", "2000ms"));
  BOOST_TEST(has("K8sbridgeConf", path));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(versions) {
  BOOST_TEST(kf::SlurmVersionText(0x180b05) == "24.11.5");
  BOOST_TEST(kf::SlurmVersionText(0x190500) == "25.05.0");
  BOOST_TEST(*kf::ParseSlurmVersionLine("slurm 24.11.5\n") == 0x180b05u);
  BOOST_TEST(!kf::ParseSlurmVersionLine("slurm").has_value());
  BOOST_TEST(!kf::ParseSlurmVersionLine("slurm 24.x").has_value());
  BOOST_TEST(!kf::VersionSkewMessage(0x180b05, 0x180b05).has_value());
  auto m = kf::VersionSkewMessage(0x180b04, 0x180b05);
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->find("built for Slurm 24.11.4") != std::string::npos);
  BOOST_TEST(m->find("this daemon is Slurm 24.11.5") != std::string::npos);
}
