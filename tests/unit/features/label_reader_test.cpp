// The slurmd label read: API first within the deadline, then the cache of the same
// Kubernetes node; the log says which.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/features/label_reader.h"
#include "k8sbridge/features/plugin_support.h"
#include "k8sbridge/hostlist.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "recording_logger.h"

namespace conf = k8sbridge::conf;
namespace kf = k8sbridge::features;
namespace kube = k8sbridge::kube;
using k8sbridge::LogLevel;
using k8sbridge::Status;
using kube::FakeTransport;

namespace {

constexpr std::string_view kNodeJson = R"({"apiVersion":"v1","kind":"Node","metadata":{
  "name":"gpu-7","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3",
  "feature.node.kubernetes.io/rdma.available":"true"}}})";

struct Fixture {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger log;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  std::unique_ptr<kube::Client> client;
  kf::MemoryLabelCache cache;
  conf::BridgeConfig config;

  Fixture() {
    auto c = conf::ParseBridgeConfig(
        "ClusterName=x\nFeatureLabelTimeout=1500ms\nFeatureLabelPrefix=feature.node.kubernetes.io/"
        "\n"
        "Feature=h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n",
        "/etc/slurm/k8sbridge.conf", k8sbridge::BuiltinHostlists());
    BOOST_REQUIRE(c.ok());
    config = std::move(*c);
    client = kube::testing::NoRetryClient(transport, clock, log, "t");
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(label_reader, Fixture)

BOOST_AUTO_TEST_CASE(api_answer_is_used_and_cached) {
  transport->Push(FakeTransport::Json(200, std::string(kNodeJson)));
  auto read = kf::ReadNodeLabels(*client, "gpu-7", config.node_features.label_timeout, cache, log);
  BOOST_TEST((read.source == kf::LabelRead::Source::kApi));
  BOOST_TEST(read.labels.at("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3");
  auto requests = transport->requests();
  BOOST_REQUIRE(requests.size() == 1u);
  BOOST_TEST(requests[0].url.find("/api/v1/nodes/gpu-7") != std::string::npos);
  // The call carries the deadline, not the client's longer default.
  BOOST_TEST(requests[0].timeout.count() <= 1500);
  BOOST_TEST(cache.writes() == 1);
  auto cached = kf::DecodeLabelCache(*cache.Read());
  BOOST_REQUIRE(cached.ok());
  BOOST_TEST(cached->host_node == "gpu-7");
  BOOST_TEST(cached->labels.at("feature.node.kubernetes.io/rdma.available") == "true");
}

BOOST_AUTO_TEST_CASE(api_down_uses_the_cache_and_says_so) {
  cache.Set(kf::EncodeLabelCache("gpu-7", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}},
                                 clock.WallNow()));
  transport->Push(FakeTransport::Error(Status::Timeout("operation timed out after 1500 ms")));
  auto features = kf::SlurmdFeatures(config, "gpu-7", *client, cache, log);
  BOOST_REQUIRE(features.has_value());
  BOOST_TEST(*features == "h100");
  BOOST_TEST(log.Contains("using the label cache", LogLevel::kWarning));
  BOOST_TEST(log.Contains("within 1500 ms", LogLevel::kWarning));
  BOOST_TEST(transport->requests().size() == 1u);  // one try, no retries
}

BOOST_AUTO_TEST_CASE(cache_of_another_kubernetes_node_is_not_used) {
  cache.Set(kf::EncodeLabelCache("gpu-3", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}},
                                 clock.WallNow()));
  transport->Push(FakeTransport::Error(Status::Unavailable("connection refused")));
  auto features = kf::SlurmdFeatures(config, "gpu-7", *client, cache, log);
  BOOST_TEST(!features.has_value());
  BOOST_TEST(log.Contains("holds node gpu-3, not gpu-7", LogLevel::kError));
}

BOOST_AUTO_TEST_CASE(no_api_and_no_cache_reports_nothing) {
  transport->Push(FakeTransport::Error(Status::Unavailable("connection refused")));
  auto features = kf::SlurmdFeatures(config, "gpu-7", *client, cache, log);
  BOOST_TEST(!features.has_value());
  BOOST_TEST(log.Contains("no usable label cache", LogLevel::kError));
}

BOOST_AUTO_TEST_CASE(corrupt_cache_is_reported) {
  cache.Set("{not json");
  transport->Push(FakeTransport::Error(Status::Unavailable("connection refused")));
  auto read = kf::ReadNodeLabels(*client, "gpu-7", config.node_features.label_timeout, cache, log);
  BOOST_TEST((read.source == kf::LabelRead::Source::kNone));
  BOOST_TEST(log.Contains("unreadable", LogLevel::kError));
}

BOOST_AUTO_TEST_CASE(failed_cache_write_is_a_warning_not_a_failure) {
  cache.Fail(Status::IoError("disk full"));
  transport->Push(FakeTransport::Json(200, std::string(kNodeJson)));
  auto read = kf::ReadNodeLabels(*client, "gpu-7", config.node_features.label_timeout, cache, log);
  BOOST_TEST((read.source == kf::LabelRead::Source::kApi));
  BOOST_TEST(log.Contains("disk full", LogLevel::kWarning));
}

BOOST_AUTO_TEST_CASE(not_in_a_pod_reports_nothing) {
  kf::SlurmdIdentity who;
  who.slurm_node = "w-0";
  BOOST_TEST(!kf::SlurmdFeatures(config, who, log).has_value());
  BOOST_TEST(log.Contains("K8SBRIDGE_HOST_NODE is not set"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(file_cache_round_trip_and_atomic_replace) {
  auto dir = std::filesystem::temp_directory_path() /
             ("k8sbridge-features-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  kf::FileLabelCache cache((dir / "labels.json").string());
  BOOST_TEST((cache.Read().status().code() == Status::Code::kNotFound));
  BOOST_TEST(cache.Write("one").ok());
  BOOST_TEST(cache.Write("two").ok());
  BOOST_TEST(*cache.Read() == "two");
  BOOST_TEST(!std::filesystem::exists(dir / "labels.json.tmp"));
  kf::FileLabelCache nowhere((dir / "missing" / "labels.json").string());
  BOOST_TEST(!nowhere.Write("x").ok());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(cache_path) {
  auto c = conf::ParseBridgeConfig("ClusterName=x\n", "/k.conf", k8sbridge::BuiltinHostlists());
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(kf::LabelCachePath(*c, "/var/spool/slurmd/%n", "w-3") ==
             "/var/spool/slurmd/w-3/k8sbridge-labels.json");
  BOOST_TEST(kf::LabelCachePath(*c, "", "w-3") == "/var/spool/slurmd/k8sbridge-labels.json");
  c->node_features.cache_file = "/var/cache/%n.json";
  BOOST_TEST(kf::LabelCachePath(*c, "/x", "w-3") == "/var/cache/w-3.json");
}
