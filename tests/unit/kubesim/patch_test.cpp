#include <boost/test/unit_test.hpp>

#include "patch.h"
#include "store.h"
#include "test_util.h"

using namespace kubesim;
using namespace kubesim::testing;

BOOST_AUTO_TEST_SUITE(patch)

BOOST_AUTO_TEST_CASE(merge_patch_follows_rfc7386) {
  auto doc = Json(R"({"a":{"b":1,"c":2},"l":[1,2],"k":"v"})");
  ApplyMergePatch(doc, Json(R"({"a":{"b":null,"d":3},"l":[3],"n":{"x":1}})"), doc.GetAllocator());
  BOOST_TEST(ToJson(doc) == R"({"a":{"c":2,"d":3},"l":[3],"k":"v","n":{"x":1}})");
}

BOOST_AUTO_TEST_CASE(json_patch_operations) {
  auto doc = Json(R"({"metadata":{"labels":{"a/b":"1"}},"list":[1,2,3]})");
  auto p = Json(R"([
    {"op":"test","path":"/metadata/labels/a~1b","value":"1"},
    {"op":"add","path":"/list/1","value":9},
    {"op":"add","path":"/list/-","value":4},
    {"op":"remove","path":"/list/0"},
    {"op":"replace","path":"/metadata/labels/a~1b","value":"2"},
    {"op":"copy","from":"/metadata/labels","path":"/copied"},
    {"op":"move","from":"/copied","path":"/moved"}])");
  BOOST_REQUIRE(ApplyJsonPatch(doc, p).ok());
  BOOST_TEST(ToJson(doc) ==
             R"({"metadata":{"labels":{"a/b":"2"}},"list":[9,2,3,4],"moved":{"a/b":"2"}})");
}

BOOST_AUTO_TEST_CASE(json_patch_failures) {
  auto doc = Json(R"({"a":1})");
  BOOST_TEST((ApplyJsonPatch(doc, Json(R"([{"op":"test","path":"/a","value":2}])")).code() ==
              Status::Code::kConflict));
  BOOST_TEST((ApplyJsonPatch(doc, Json(R"([{"op":"remove","path":"/zzz"}])")).code() ==
              Status::Code::kInvalidArgument));
  BOOST_TEST((ApplyJsonPatch(doc, Json(R"([{"op":"replace","path":"/zzz","value":1}])")).code() ==
              Status::Code::kInvalidArgument));
  BOOST_TEST((ApplyJsonPatch(doc, Json(R"([{"op":"frobnicate","path":"/a"}])")).code() ==
              Status::Code::kInvalidArgument));
  BOOST_TEST(
      (ApplyJsonPatch(doc, Json(R"({"op":"add"})")).code() == Status::Code::kInvalidArgument));
  BOOST_TEST(ToJson(doc) == R"({"a":1})");
}

BOOST_AUTO_TEST_CASE(strategic_merge_merges_keyed_lists) {
  auto pod =
      Json(R"({"spec":{"containers":[{"name":"a","image":"1","env":[{"name":"X","value":"1"}]},
                                            {"name":"b","image":"2"}]},
                      "status":{"conditions":[{"type":"Ready","status":"False"}]},
                      "metadata":{"finalizers":["f1"]}})");
  auto p = Json(R"({"spec":{"containers":[{"name":"a","env":[{"name":"Y","value":"2"}]},
                                          {"name":"b","$patch":"delete"},
                                          {"name":"c","image":"3"}]},
                    "status":{"conditions":[{"type":"Ready","status":"True"},
                                            {"type":"PodScheduled","status":"True"}]},
                    "metadata":{"finalizers":["f2","f1"]}})");
  BOOST_REQUIRE(ApplyStrategicMergePatch(pod, p, pod.GetAllocator()).ok());
  BOOST_TEST(
      ToJson(pod["spec"]) ==
      R"({"containers":[{"name":"a","image":"1","env":[{"name":"X","value":"1"},{"name":"Y","value":"2"}]},{"name":"c","image":"3"}]})");
  BOOST_TEST(
      ToJson(pod["status"]) ==
      R"({"conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]})");
  BOOST_TEST(ToJson(pod["metadata"]) == R"({"finalizers":["f1","f2"]})");
}

BOOST_AUTO_TEST_CASE(strategic_merge_taints_are_atomic_and_null_deletes) {
  auto node = Json(R"({"spec":{"unschedulable":true,"taints":[{"key":"a","effect":"NoSchedule"},
                                                              {"key":"b","effect":"NoSchedule"}]}})");
  BOOST_REQUIRE(ApplyStrategicMergePatch(
                    node, Json(R"({"spec":{"taints":[{"key":"b","effect":"NoSchedule"}]}})"),
                    node.GetAllocator())
                    .ok());
  BOOST_TEST(ToJson(node) ==
             R"({"spec":{"unschedulable":true,"taints":[{"key":"b","effect":"NoSchedule"}]}})");
  BOOST_REQUIRE(ApplyStrategicMergePatch(node,
                                         Json(R"({"spec":{"taints":null,"unschedulable":null}})"),
                                         node.GetAllocator())
                    .ok());
  BOOST_TEST(ToJson(node) == R"({"spec":{}})");
}

BOOST_AUTO_TEST_CASE(strategic_merge_directives) {
  auto doc = Json(R"({"metadata":{"labels":{"a":"1","b":"2"},"finalizers":["x","y"]},
                      "spec":{"containers":[{"name":"a"},{"name":"b"}]}})");
  auto p = Json(R"({"metadata":{"labels":{"$patch":"replace","c":"3"},
                                "$deleteFromPrimitiveList/finalizers":["x"],
                                "$setElementOrder/finalizers":["y"]},
                    "spec":{"containers":[{"$patch":"replace"},{"name":"z"}]}})");
  BOOST_REQUIRE(ApplyStrategicMergePatch(doc, p, doc.GetAllocator()).ok());
  BOOST_TEST(
      ToJson(doc) ==
      R"({"metadata":{"labels":{"c":"3"},"finalizers":["y"]},"spec":{"containers":[{"name":"z"}]}})");
  auto missing_key = Json(R"({"spec":{"containers":[{"image":"no-name"}]}})");
  BOOST_TEST((ApplyStrategicMergePatch(doc, missing_key, doc.GetAllocator()).code() ==
              Status::Code::kInvalidArgument));
}

// What kubectl's client-side apply sends when a manifest drops a field: null for a map
// key, $patch: delete for a keyed list element, $retainKeys for a volume changing source.
BOOST_AUTO_TEST_CASE(strategic_merge_removals_kubectl_sends) {
  auto pod = Json(R"({"metadata":{"labels":{"a":"1","b":"2"}},
                      "spec":{"volumes":[{"name":"v","emptyDir":{}}],
                              "containers":[{"name":"c","env":[{"name":"X"},{"name":"Y"}]}]}})");
  auto p = Json(R"({"metadata":{"labels":{"b":null}},
                    "spec":{"$setElementOrder/volumes":[{"name":"v"}],
                            "volumes":[{"$retainKeys":["hostPath","name"],"name":"v",
                                        "emptyDir":null,"hostPath":{"path":"/d"}}],
                            "containers":[{"name":"c","env":[{"$patch":"delete","name":"X"}]}]}})");
  BOOST_REQUIRE(ApplyStrategicMergePatch(pod, p, pod.GetAllocator()).ok());
  BOOST_TEST(
      ToJson(pod) ==
      R"({"metadata":{"labels":{"a":"1"}},"spec":{"volumes":[{"name":"v","hostPath":{"path":"/d"}}],"containers":[{"name":"c","env":[{"name":"Y"}]}]}})");
  auto bad = Json(R"({"spec":{"$retainKeys":"name"}})");
  BOOST_TEST((ApplyStrategicMergePatch(pod, bad, pod.GetAllocator()).code() ==
              Status::Code::kInvalidArgument));
}

BOOST_AUTO_TEST_CASE(yaml_to_json_types) {
  auto doc =
      YamlToJson("a: 1\nb: '1'\nc: true\nd: ~\ne: 1.5\nf: [x, -2]\ng: {h: \"no\"}\ni: 08x\n");
  BOOST_REQUIRE(doc.ok());
  BOOST_TEST(ToJson(**doc) ==
             R"({"a":1,"b":"1","c":true,"d":null,"e":1.5,"f":["x",-2],"g":{"h":"no"},"i":"08x"})");
  auto bad = YamlToJson("a: [1, 2");
  BOOST_TEST((bad.status().code() == Status::Code::kInvalidArgument));
}

BOOST_AUTO_TEST_SUITE_END()
