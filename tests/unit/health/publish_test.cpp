#include <boost/test/unit_test.hpp>

#include "../kube/testing.h"
#include "fake_transport.h"
#include "k8sbridge/health/publish.h"

namespace health = k8sbridge::health;
namespace kube = k8sbridge::kube;
using FT = kube::FakeTransport;

namespace {

std::string NodeJson(const std::string& conditions) {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-7","uid":"u7"},)"
         R"("status":{"conditions":[)" +
         conditions + "]}}";
}

const std::vector<health::Finding> kXid = {{"xid", "GPU 3", "XID 79 (GPU has fallen off the bus)"}};

kube::EventRecorderOptions Manual() {
  kube::EventRecorderOptions o;
  o.reporting_controller = "k8sbridge.io/health";
  o.reporting_instance = "w-3";
  o.start_thread = false;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(publish)

BOOST_AUTO_TEST_CASE(a_finding_sets_the_condition_and_records_a_warning) {
  kube::testing::Env env;
  env.transport->Push(FT::Json(200, NodeJson(R"({"type":"Ready","status":"True"})")));
  env.transport->SetFallback([](const FT::Recorded& r) { return FT::Json(200, r.body); });
  kube::EventRecorder events(*env.client, Manual());
  auto r = health::PublishCondition(*env.client, &events, "gpu-7", "K8sbridgeHealthProblem", kXid);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().message());
  BOOST_TEST(r->changed);
  BOOST_TEST(r->status == "True");
  auto reqs = env.requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
  BOOST_TEST(reqs[1].method == "PATCH");
  BOOST_TEST(reqs[1].url == "https://k8s.test:6443/api/v1/nodes/gpu-7/status");
  BOOST_TEST(reqs[1].Header("Content-Type") == "application/strategic-merge-patch+json");
  auto patch = *kube::Object::Parse(reqs[1].body);
  BOOST_TEST(patch.String("/status/conditions/0/type") == "K8sbridgeHealthProblem");
  BOOST_TEST(patch.String("/status/conditions/0/status") == "True");
  BOOST_TEST(patch.String("/status/conditions/0/reason") == "HealthCheckFailed");
  BOOST_TEST(patch.String("/status/conditions/0/message") ==
             "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)");
  BOOST_TEST(events.ProcessPending() == 1u);
  auto event = *kube::Object::Parse(env.requests().back().body);
  BOOST_TEST(event.String("/type") == "Warning");
  BOOST_TEST(event.String("/reason") == "HealthCheckFailed");
  BOOST_TEST(event.String("/regarding/kind") == "Node");
  BOOST_TEST(event.String("/regarding/name") == "gpu-7");
}

BOOST_AUTO_TEST_CASE(an_unchanged_status_keeps_its_transition_time_and_records_nothing) {
  kube::testing::Env env;
  env.transport->Push(FT::Json(200, NodeJson(R"({"type":"K8sbridgeHealthProblem","status":"False",)"
                                             R"("lastTransitionTime":"2026-01-01T00:00:00Z"})")));
  env.transport->SetFallback([](const FT::Recorded& r) { return FT::Json(200, r.body); });
  kube::EventRecorder events(*env.client, Manual());
  auto r = health::PublishCondition(*env.client, &events, "gpu-7", "K8sbridgeHealthProblem", {});
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(!r->changed);
  auto patch = *kube::Object::Parse(env.requests().at(1).body);
  BOOST_TEST(patch.String("/status/conditions/0/lastTransitionTime") == "2026-01-01T00:00:00Z");
  BOOST_TEST(patch.String("/status/conditions/0/reason") == "HealthCheckPassed");
  BOOST_TEST(events.ProcessPending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_missing_node_says_how_to_name_it) {
  kube::testing::Env env;
  env.transport->Push(
      FT::Json(404, kube::testing::StatusJson(404, "NotFound", "nodes gpu-7 not found")));
  auto r = health::PublishCondition(*env.client, nullptr, "gpu-7", "K8sbridgeHealthProblem", kXid);
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.status().message().find("set KubeNode=") != std::string::npos, r.status().message());
}

BOOST_AUTO_TEST_SUITE_END()
