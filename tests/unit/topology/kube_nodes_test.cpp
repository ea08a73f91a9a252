// k8sbridge-topology --kube (programs/topology/kube_nodes.cpp) over a scripted API
// server: nodes and labels come through, and a refused call names the permission.
#define BOOST_TEST_MODULE k8sbridge topology kube
#include <boost/test/unit_test.hpp>

#include "../kube/testing.h"
#include "fake_clock.h"
#include "fake_transport.h"
#include "kube_nodes.h"
#include "recording_logger.h"

namespace kube = k8sbridge::kube;
namespace topo = k8sbridge::topology;
using FT = kube::FakeTransport;

namespace {

struct Env {
  k8sbridge::FakeClock clock;
  k8sbridge::RecordingLogger logger;
  std::shared_ptr<FT> transport = std::make_shared<FT>();
  std::unique_ptr<kube::Client> client = kube::testing::NoRetryClient(transport, clock, logger);
};

const char* kNodeList =
    R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[)"
    R"({"metadata":{"name":"w-0","labels":{"network.topology.nvidia.com/leaf":"l1"}}},)"
    R"({"metadata":{"name":"w-1"}}]})";

std::string Forbidden(const std::string& verb) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is )"
         R"(forbidden: User \"system:serviceaccount:slurm:k8sbridge-controller\" cannot )" +
         verb +
         R"( resource \"nodes\" in API group \"\" at the cluster scope","reason":)"
         R"("Forbidden","details":{"kind":"nodes"},"code":403})";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kube_nodes)

BOOST_AUTO_TEST_CASE(a_list_gives_names_and_labels) {
  Env env;
  env.transport->Push(FT::Json(200, kNodeList));
  auto nodes = topo::ListLabeledNodes(*env.client);
  BOOST_REQUIRE_MESSAGE(nodes.ok(), nodes.status().ToString());
  BOOST_REQUIRE_EQUAL(nodes->size(), 2u);
  BOOST_CHECK_EQUAL((*nodes)[0].name, "w-0");
  BOOST_CHECK_EQUAL((*nodes)[0].labels.at("network.topology.nvidia.com/leaf"), "l1");
  BOOST_CHECK((*nodes)[1].labels.empty());
  BOOST_CHECK(env.transport->requests().at(0).url.find("/api/v1/nodes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_refused_list_names_the_permission) {
  Env env;
  env.transport->Push(FT::Json(403, Forbidden("list")));
  auto nodes = topo::ListLabeledNodes(*env.client);
  BOOST_REQUIRE(!nodes.ok());
  const std::string& m = nodes.status().message();
  BOOST_CHECK(nodes.status().code() == k8sbridge::Status::Code::kPermissionDenied);
  BOOST_CHECK_MESSAGE(m.find("needs \"list\" on nodes") != std::string::npos, m);
  BOOST_CHECK_MESSAGE(m.find("ClusterRole") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(a_refused_watch_stops_the_start_with_the_permission) {
  Env env;
  env.transport->Push(FT::Json(200, kNodeList));
  env.transport->Push(FT::Json(403, Forbidden("watch")));
  auto watch = topo::NodeWatch::Start(std::move(env.client), std::chrono::seconds(1));
  BOOST_REQUIRE(!watch.ok());
  const std::string& m = watch.status().message();
  BOOST_CHECK_MESSAGE(m.find("needs \"watch\" on nodes") != std::string::npos, m);
  auto requests = env.transport->requests();
  BOOST_REQUIRE_EQUAL(requests.size(), 2u);
  BOOST_CHECK(requests[1].url.find("watch=1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refused_credentials_say_so) {
  auto s = topo::ExplainNodeCall(
      k8sbridge::Status::Unauthenticated("LIST /api/v1/nodes: 401 Unauthorized"), "list",
      "https://k8s.test:6443");
  BOOST_CHECK(s.message().find("refused the credentials") != std::string::npos);
  auto other = topo::ExplainNodeCall(k8sbridge::Status::Unavailable("connection refused"), "list",
                                     "https://k8s.test:6443");
  BOOST_CHECK_EQUAL(other.message(), "list nodes at https://k8s.test:6443: connection refused");
}

BOOST_AUTO_TEST_SUITE_END()
