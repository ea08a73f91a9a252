// kubesim's protobuf Eviction (protobuf.h): the wire format of client-go's protobuf
// serializer, with the field numbers of k8s.io/api/policy/v1/generated.proto and
// k8s.io/apimachinery/pkg/{runtime,apis/meta/v1}/generated.proto.
#include <boost/test/unit_test.hpp>

#include "api.h"
#include "fake_clock.h"
#include "nodes.h"
#include "protobuf.h"
#include "store.h"
#include "test_util.h"

using namespace kubesim;

namespace {

// Protobuf fields, as a proto2 encoder writes them.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string Bytes(int field, const std::string& data) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(data.size()) + data;
}
std::string Int(int field, uint64_t v) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(v);
}

// What client-go sends for `kubectl drain`'s eviction when its content type is
// protobuf: "k8s\0", then runtime.Unknown{typeMeta, raw = policy.v1.Eviction}.
std::string EvictionBody(const std::string& name, const std::string& kind = "Eviction") {
  const std::string meta = Bytes(1, name) + Bytes(3, "default");       // ObjectMeta name, namespace
  const std::string preconditions = Bytes(1, "u-1") + Bytes(2, "42");  // uid, resourceVersion
  const std::string options =
      Int(1, 20) + Bytes(2, preconditions) + Int(3, 0) + Bytes(4, "Background") + Bytes(5, "All");
  const std::string eviction = Bytes(1, meta) + Bytes(2, options);
  const std::string type_meta = Bytes(1, "policy/v1") + Bytes(2, kind);
  return std::string("k8s\0", 4) + Bytes(1, type_meta) + Bytes(2, eviction) + Bytes(3, "") +
         Bytes(4, "");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(protobuf)

BOOST_AUTO_TEST_CASE(an_eviction_decodes_field_by_field) {
  auto e = DecodeEvictionProtobuf(EvictionBody("w-0"));
  BOOST_REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  BOOST_TEST(e->api_version == "policy/v1");
  BOOST_TEST(e->name == "w-0");
  BOOST_TEST(e->ns == "default");
  BOOST_TEST(e->grace_period_seconds.value_or(-1) == 20);
  BOOST_TEST(e->precondition_uid == "u-1");
  BOOST_TEST(e->precondition_resource_version == "42");
  BOOST_TEST(e->orphan_dependents.value_or(true) == false);
  BOOST_TEST(e->propagation_policy == "Background");
  BOOST_TEST(e->dry_run == std::vector<std::string>{"All"});
  BOOST_TEST(EvictionJson(*e) ==
             R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"w-0",)"
             R"("namespace":"default"},"deleteOptions":{"gracePeriodSeconds":20,"preconditions":)"
             R"({"uid":"u-1","resourceVersion":"42"},"orphanDependents":false,)"
             R"("propagationPolicy":"Background","dryRun":["All"]}})");
}

BOOST_AUTO_TEST_CASE(malformed_bodies_name_what_is_wrong) {
  auto no_magic = DecodeEvictionProtobuf("{\"kind\":\"Eviction\"}");
  BOOST_TEST(no_magic.status().message().find("magic") != std::string::npos);
  std::string body = EvictionBody("w-0");
  auto cut = DecodeEvictionProtobuf(body.substr(0, body.size() - 12));
  BOOST_TEST(!cut.ok());
  BOOST_TEST(cut.status().message().find("bytes long") != std::string::npos,
             cut.status().message());
  auto pod = DecodeEvictionProtobuf(EvictionBody("w-0", "Pod"));
  BOOST_TEST(pod.status().message().find("not a policy/v1 Eviction") != std::string::npos);
}

// Through the API: a protobuf eviction is an eviction; any other protobuf body is 415.
BOOST_AUTO_TEST_CASE(the_api_takes_a_protobuf_eviction) {
  k8sbridge::FakeClock clock;
  Store store{clock, 1000};
  Api api{store};
  BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
  for (auto& node : MakeFakeNodes(FakeNodeOptions{}))
    BOOST_REQUIRE(store.Create("nodes", "", std::move(*node)).ok());
  auto call = [&](const std::string& path, const std::string& body, const std::string& type) {
    ApiRequest req;
    req.method = "POST";
    req.path = path;
    req.body = body;
    req.content_type = type;
    req.accept = "application/vnd.kubernetes.protobuf,application/json";
    Route route;
    ApiResponse error;
    return api.ResolveRoute(req, route, error) ? api.Handle(req, route) : error;
  };
  const std::string protobuf = "application/vnd.kubernetes.protobuf";
  BOOST_TEST(call("/api/v1/namespaces/default/pods",
                  R"({"metadata":{"name":"w-0","uid":"x"},"spec":{"nodeName":"node-0",)"
                  R"("containers":[{"name":"c","image":"x"}]}})",
                  "application/json")
                 .code == 201);
  // A well-formed protobuf of a kind kubesim does not read: 415; a cut-off magic: 400.
  const std::string pod_body = std::string("k8s\0", 4) +
                               Bytes(1, Bytes(1, "v1") + Bytes(2, "Pod")) +
                               Bytes(2, Bytes(1, Bytes(1, "p")));
  BOOST_TEST(call("/api/v1/namespaces/default/pods", pod_body, protobuf).code == 415);
  BOOST_TEST(call("/api/v1/namespaces/default/pods", "k8s", protobuf).code == 400);
  BOOST_TEST(call("/api/v1/namespaces/default/pods/w-0/eviction", "garbage", protobuf).code == 400);
  // Without the preconditions and dryRun of the full body: evicted for real.
  const std::string meta = Bytes(1, "w-0") + Bytes(3, "default");
  const std::string plain = std::string("k8s\0", 4) +
                            Bytes(1, Bytes(1, "policy/v1") + Bytes(2, "Eviction")) +
                            Bytes(2, Bytes(1, meta) + Bytes(2, Int(1, 5)));
  auto evicted = call("/api/v1/namespaces/default/pods/w-0/eviction", plain, protobuf);
  BOOST_TEST(evicted.code == 201, evicted.body);
  auto pod = store.Get("pods", "default", "w-0");
  BOOST_REQUIRE(pod.ok());
  BOOST_TEST(!GetString(**pod, "metadata.deletionTimestamp").empty());
}

// What `kubectl create configmap|secret|namespace` send: the object's message with
// ObjectMeta (name 1, namespace 3, labels 11 as map entries) and the kind's fields.
BOOST_AUTO_TEST_CASE(configmaps_secrets_and_namespaces_read_as_json) {
  auto envelope = [](const std::string& kind, const std::string& raw) {
    return std::string("k8s\0", 4) + Bytes(1, Bytes(1, "v1") + Bytes(2, kind)) + Bytes(2, raw);
  };
  const std::string meta =
      Bytes(1, Bytes(1, "cm") + Bytes(3, "default") + Bytes(11, Bytes(1, "app") + Bytes(2, "x")));
  auto cm = ProtobufBodyAsJson(
      envelope("ConfigMap", meta + Bytes(2, Bytes(1, "a") + Bytes(2, "1")) +
                                Bytes(3, Bytes(1, "bin") + Bytes(2, "hi!")) + Int(4, 1)));
  BOOST_REQUIRE(cm.ok());
  auto doc = testing::Json(*cm);
  BOOST_TEST(GetString(doc, "kind") == "ConfigMap");
  BOOST_TEST(GetString(doc, "metadata.name") == "cm");
  BOOST_TEST(GetString(doc, "metadata.namespace") == "default");
  BOOST_TEST(GetString(doc, "metadata.labels.app") == "x");
  BOOST_TEST(GetString(doc, "data.a") == "1");
  BOOST_TEST(GetString(doc, "binaryData.bin") == "aGkh");  // base64, as in JSON
  BOOST_TEST(doc["immutable"].GetBool());

  auto secret = ProtobufBodyAsJson(envelope(
      "Secret",
      Bytes(1, Bytes(1, "s")) + Bytes(2, Bytes(1, "k") + Bytes(2, "ab")) + Bytes(3, "Opaque")));
  BOOST_REQUIRE(secret.ok());
  auto sdoc = testing::Json(*secret);
  BOOST_TEST(GetString(sdoc, "data.k") == "YWI=");
  BOOST_TEST(GetString(sdoc, "type") == "Opaque");

  auto ns = ProtobufBodyAsJson(
      envelope("Namespace", Bytes(1, Bytes(1, "team")) + Bytes(2, Bytes(1, "kubernetes"))));
  BOOST_REQUIRE(ns.ok());
  auto nsdoc = testing::Json(*ns);
  BOOST_TEST(GetString(nsdoc, "metadata.name") == "team");
  BOOST_TEST(nsdoc["spec"]["finalizers"][0].GetString() == std::string("kubernetes"));

  auto pod = ProtobufBodyAsJson(envelope("Pod", Bytes(1, Bytes(1, "p"))));
  BOOST_TEST((pod.status().code() == k8sbridge::Status::Code::kNotFound));
  auto cut = ProtobufBodyAsJson(envelope("ConfigMap", meta).substr(0, 20));
  BOOST_TEST((cut.status().code() == k8sbridge::Status::Code::kInvalidArgument));
}

BOOST_AUTO_TEST_SUITE_END()
