#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/power/setup.h"

namespace conf = k8sbridge::conf;
namespace power = k8sbridge::power;

BOOST_AUTO_TEST_SUITE(setup)

BOOST_AUTO_TEST_CASE(loads_each_template_and_maps_nodes) {
  std::string dir = "/tmp/k8sbridge-power-setup-" + std::to_string(::getpid());
  std::string good = dir + "-good.yaml", bad = dir + "-bad.yaml";
  {
    std::ofstream(good) << "spec:\n  containers: [{name: slurmd, image: w}]\n";
    std::ofstream(bad) << "spec:\n  containers: []\n";
  }
  auto config =
      conf::ParseBridgeConfig("ClusterName=c\nNodeGroup=a Nodes=a-[0-1] PodTemplate=" + good +
                                  "\nNodeGroup=b Nodes=b-0 PodTemplate=" + good + "\n",
                              "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(config.ok());
  auto setup = power::LoadPowerSetup(*config);
  BOOST_REQUIRE_MESSAGE(setup.ok(), setup.status().ToString());
  auto a1 = setup->For("a-1");
  BOOST_REQUIRE(a1.ok());
  BOOST_CHECK_EQUAL(a1->first->name, "a");
  BOOST_CHECK_EQUAL(a1->second->file, good);
  auto stray = setup->For("z-9");
  BOOST_REQUIRE(!stray.ok());
  BOOST_CHECK_EQUAL(stray.status().message(),
                    "node z-9 is in no NodeGroup of /etc/slurm/k8sbridge.conf: add it to the "
                    "Nodes= of a NodeGroup line");

  auto broken =
      conf::ParseBridgeConfig("ClusterName=c\n\nNodeGroup=a Nodes=a-0 PodTemplate=" + bad + "\n",
                              "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(broken.ok());
  auto refused = power::LoadPowerSetup(*broken);
  std::remove(good.c_str());
  std::remove(bad.c_str());
  BOOST_REQUIRE(!refused.ok());
  BOOST_CHECK_EQUAL(refused.status().message(),
                    "/etc/slurm/k8sbridge.conf:3: NodeGroup=a: pod template " + bad +
                        ": spec.containers: must list at least one container (the one named "
                        "slurmd, else the first, runs the worker)");

  auto empty = conf::ParseBridgeConfig("ClusterName=c\n", "k.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(empty.ok());
  auto none = power::LoadPowerSetup(*empty);
  BOOST_REQUIRE(!none.ok());
  BOOST_CHECK_EQUAL(none.status().message(),
                    "k.conf: no NodeGroup lines: add NodeGroup=<name> Nodes=<hostlist> "
                    "PodTemplate=<file> for the CLOUD nodes k8sbridge should run as pods");
}

BOOST_AUTO_TEST_CASE(shipped_templates_load) {
  // conf-templates/ must stay valid: parse the example config and its pod template.
  std::string root = K8SBRIDGE_SOURCE_ROOT;
  auto config = conf::LoadBridgeConfig(root + "/conf-templates/k8sbridge.conf",
                                       k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  BOOST_CHECK_EQUAL(config->node_groups.size(), 2u);
  BOOST_CHECK_EQUAL(config->features.size(), 3u);
  auto tmpl = power::LoadPodTemplate(root + "/conf-templates/worker-pod.yaml");
  BOOST_REQUIRE_MESSAGE(tmpl.ok(), tmpl.status().ToString());
  BOOST_CHECK_EQUAL((*tmpl->pod)["spec"]["volumes"][0]["secret"]["defaultMode"].GetInt(), 0400);
}

// deploy/ must stay valid too: each kustomization's ConfigMap is the base's
// config/ with the overlay's files over it (configMapGenerator, behavior: merge).
BOOST_AUTO_TEST_CASE(deploy_configs_load) {
  namespace fs = std::filesystem;
  const fs::path root = K8SBRIDGE_SOURCE_ROOT;
  const fs::path base = root / "deploy/base/config";
  for (const char* overlay : {"", "overlays/demo", "overlays/example-gpu"}) {
    BOOST_TEST_CONTEXT("deploy/" << (*overlay ? overlay : "base")) {
      const fs::path dir =
          fs::temp_directory_path() / ("k8sbridge-deploy-" + std::to_string(::getpid()));
      fs::remove_all(dir);
      fs::copy(base, dir);
      if (*overlay != '\0')
        fs::copy(root / "deploy" / overlay / "config", dir, fs::copy_options::overwrite_existing);
      auto config =
          conf::LoadBridgeConfig((dir / "k8sbridge.conf").string(), k8sbridge::BuiltinHostlists());
      BOOST_REQUIRE_MESSAGE(config.ok(), config.status().ToString());
      BOOST_CHECK(config->kube.in_cluster);
      auto setup = power::LoadPowerSetup(*config);
      BOOST_REQUIRE_MESSAGE(setup.ok(), setup.status().ToString());
      BOOST_CHECK_EQUAL(setup->templates.size(), 1u);
      fs::remove_all(dir);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
