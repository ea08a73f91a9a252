// The key table of k8sbridge.conf (conf_keys.h): the docs' reference tables are
// rendered from it, and every row reads into the field it names.
#include <algorithm>
#include <cctype>
#include <set>
#include <span>

#include <boost/test/unit_test.hpp>

#include "../key_table_checks.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/conf/conf_keys.h"

namespace conf = k8sbridge::conf;
using conf::Section;

namespace {

// Checks that `doc` holds the table rendered for `sections`.
void CheckDocTable(const std::string& doc, const std::vector<Section>& sections) {
  k8sbridge::testing::CheckDocHoldsTable(doc, conf::GlobalKeysMarkdown(sections), "conf_keys.cpp");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conf_keys)

BOOST_AUTO_TEST_CASE(docs_power_md_lists_the_global_keys_of_the_table) {
  CheckDocTable("power.md", {Section::kCluster, Section::kKube, Section::kPower, Section::kWorker,
                             Section::kFeatures});
}

BOOST_AUTO_TEST_CASE(docs_sync_md_lists_the_sync_keys_of_the_table) {
  CheckDocTable("sync.md", {Section::kSync});
}

BOOST_AUTO_TEST_CASE(every_key_is_named_once_and_documented) {
  std::set<std::string> names;
  auto add = [&](std::string_view name, std::string_view doc) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    BOOST_TEST(names.insert(lower).second, name << " is in the table twice");
    BOOST_TEST(!doc.empty(), name << " has no doc line");
  };
  for (const auto& key : conf::GlobalKeyTable())
    add(key.name, key.doc);
  for (const auto& key : conf::NodeGroupKeyTable()) {
    BOOST_TEST((key.section == Section::kNodeGroup), key.name);
    if (key.name != "PlacementLabel" && key.name != "PlacementAffinity")
      add(key.name, key.doc);
  }
  for (const auto& key : conf::FeatureKeyTable()) {
    BOOST_TEST((key.section == Section::kFeature), key.name);
    add(key.name, key.doc);
  }
  BOOST_TEST(conf::GlobalKeys().size() == conf::GlobalKeyTable().size());
  BOOST_TEST(std::is_sorted(conf::GlobalKeys().begin(), conf::GlobalKeys().end()));
  BOOST_TEST(conf::NodeGroupKeys().front() == "NodeGroup");
  BOOST_TEST(conf::FeatureKeys().front() == "Feature");
}

BOOST_AUTO_TEST_CASE(every_row_refuses_garbage_with_a_message) {
  k8sbridge::testing::CheckRowsRefuseWithAMessage(conf::GlobalKeyTable());
  k8sbridge::testing::CheckRowsRefuseWithAMessage(conf::NodeGroupKeyTable());
  k8sbridge::testing::CheckRowsRefuseWithAMessage(conf::FeatureKeyTable());
}

BOOST_AUTO_TEST_CASE(rows_fill_the_field_of_their_section) {
  auto c = conf::ParseBridgeConfig(
      "ClusterName=a MungeCheck=no MungeSocket=/run/m.sock LogFile=/var/log/p.log "
      "GpuResource=amd.com/gpu PlacementAffinity=none SyncPollInterval=2s "
      "FeatureLabelTimeout=3s FeatureCacheFile=/c.json ConfServer=ctl:6817 "
      "SyncMaxActionsPerPass=7 AllowInsecureHttp=yes\n",
      "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(!c->power.munge_check);
  BOOST_TEST(c->power.munge_socket == "/run/m.sock");
  BOOST_TEST(c->power.log_file == "/var/log/p.log");
  BOOST_TEST(c->power.gpu_resource == "amd.com/gpu");
  BOOST_TEST((c->power.placement_affinity == conf::PlacementAffinity::kNone));
  BOOST_TEST(c->sync.poll_interval.count() == 2000);
  BOOST_TEST(c->node_features.label_timeout.count() == 3000);
  BOOST_TEST(c->node_features.cache_file == "/c.json");
  BOOST_TEST(c->worker.conf_server == "ctl:6817");
  BOOST_TEST(c->sync.max_actions_per_pass == 7);
  BOOST_TEST(c->kube.allow_insecure_http);
}

BOOST_AUTO_TEST_CASE(range_errors_name_the_range_and_the_fix) {
  auto error = [](std::string_view line) {
    auto c = conf::ParseBridgeConfig("ClusterName=a " + std::string(line) + "\n", "k.conf",
                                     k8sbridge::BuiltinHostlists());
    return c.ok() ? std::string() : c.status().message();
  };
  BOOST_TEST(error("FeatureLabelTimeout=5m") ==
             "k.conf:1:15: FeatureLabelTimeout: '5m' is out of range: give 1ms to 30s: slurmd "
             "registration waits this long at most for node labels, e.g. 2s");
  BOOST_TEST(error("SyncLeaseDuration=1s") ==
             "k.conf:1:15: SyncLeaseDuration: '1s' is out of range: give 3s to 1440m: a lease "
             "needs at least 3s (renewals every third of it)");
  BOOST_TEST(error("ConnectTimeout=0") ==
             "k.conf:1:15: ConnectTimeout: '0' is out of range: give 1ms to 1440m");
  BOOST_TEST(error("Concurrency=99999999999") ==
             "k.conf:1:15: Concurrency: 99999999999 is out of range: use 1 to 4096");
  BOOST_TEST(error("QPS=1e999") ==
             "k.conf:1:15: QPS: '1e999' is not a request rate: use a number above 0, e.g. 50");
}

BOOST_AUTO_TEST_SUITE_END()
