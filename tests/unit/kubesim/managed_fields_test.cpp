// Server-side apply with field ownership (tests/kubesim/managed_fields.h).
#include <boost/test/unit_test.hpp>

#include "api_fixture.h"
#include "managed_fields.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

const char* kSettings = "/api/v1/namespaces/default/configmaps/settings";

std::string ConfigMapYaml(const std::string& data) {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n" + data;
}

struct ApplyFixture : ApiFixture {
  ApiResponse Apply(const std::string& manager, const std::string& data, bool force = false) {
    return Send("PATCH",
                std::string(kSettings) + "?fieldManager=" + manager + (force ? "&force=true" : ""),
                ConfigMapYaml(data), "application/apply-patch+yaml");
  }
  std::string Data() { return ToJson(*Find(*Stored("configmaps", "default", "settings"), "data")); }
  // The FieldsV1 of `manager`'s entry with `operation`, as JSON ("" when none).
  std::string FieldsOfManager(const std::string& manager, const std::string& operation) {
    const rapidjson::Value* list =
        Find(*Stored("configmaps", "default", "settings"), "metadata.managedFields");
    if (list == nullptr)
      return "";
    for (const auto& e : list->GetArray()) {
      if (GetString(e, "manager") == manager && GetString(e, "operation") == operation)
        return ToJson(e["fieldsV1"]);
    }
    return "";
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(managed_fields, ApplyFixture)

BOOST_AUTO_TEST_CASE(fields_v1_round_trip) {
  auto fields = Json(
      R"({"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}}}})");
  FieldSet set = FieldsV1ToSet(fields);
  BOOST_TEST(set.size() == 4u);
  rapidjson::Document out;
  BOOST_TEST(ToJson(SetToFieldsV1(set, out.GetAllocator())) == ToJson(fields));
  std::vector<std::string> paths;
  for (const auto& p : set)
    paths.push_back(PathString(p));
  BOOST_TEST(std::count(paths.begin(), paths.end(), ".spec.containers[name=\"c\"].image") == 1);
}

BOOST_AUTO_TEST_CASE(apply_records_the_fields_of_each_manager) {
  BOOST_TEST(Apply("alice", "  a: '1'\n  b: '2'\n").code == 201);
  BOOST_TEST(FieldsOfManager("alice", "Apply") == R"({"f:data":{"f:a":{},"f:b":{}}})");
  // Another manager applying the same value shares the field: no conflict.
  BOOST_TEST(Apply("bob", "  a: '1'\n").code == 200);
  BOOST_TEST(FieldsOfManager("bob", "Apply") == R"({"f:data":{"f:a":{}}})");
  BOOST_TEST(FieldsOfManager("alice", "Apply") == R"({"f:data":{"f:a":{},"f:b":{}}})");
}

BOOST_AUTO_TEST_CASE(a_different_value_conflicts_until_forced) {
  Apply("alice", "  a: '1'\n  b: '2'\n");
  auto conflict = Apply("bob", "  a: '9'\n");
  BOOST_TEST(conflict.code == 409);
  auto status = Json(conflict.body);
  BOOST_TEST(GetString(status, "reason") == "Conflict");
  BOOST_TEST(GetString(status, "message") ==
             "Apply failed with 1 conflict: conflict with \"alice\": .data.a");
  BOOST_TEST(ToJson(status["details"]) ==
             R"({"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"alice\"",)"
             R"("field":".data.a"}]})");
  BOOST_TEST(Data() == R"({"a":"1","b":"2"})");
  auto two = Apply("bob", "  a: '9'\n  b: '8'\n");
  BOOST_TEST(GetString(Json(two.body), "message") ==
             "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b");
  BOOST_TEST(Apply("bob", "  a: '9'\n", true).code == 200);
  BOOST_TEST(Data() == R"({"a":"9","b":"2"})");
  BOOST_TEST(FieldsOfManager("alice", "Apply") == R"({"f:data":{"f:b":{}}})");
  BOOST_TEST(FieldsOfManager("bob", "Apply") == R"({"f:data":{"f:a":{}}})");
}

BOOST_AUTO_TEST_CASE(fields_no_longer_applied_are_removed_unless_shared) {
  Apply("alice", "  a: '1'\n  b: '2'\n  c: '3'\n");
  Apply("bob", "  c: '3'\n");
  BOOST_TEST(Apply("alice", "  a: '1'\n").code == 200);
  BOOST_TEST(Data() == R"({"a":"1","c":"3"})");  // b was alice's alone; c is bob's too
}

BOOST_AUTO_TEST_CASE(updates_take_the_fields_they_change) {
  Apply("alice", "  a: '1'\n");
  BOOST_TEST(Send("PATCH", std::string(kSettings) + "?fieldManager=carol",
                  R"({"data":{"a":"2","c":"3"}})", "application/merge-patch+json")
                 .code == 200);
  BOOST_TEST(FieldsOfManager("carol", "Update") == R"({"f:data":{"f:a":{},"f:c":{}}})");
  BOOST_TEST(FieldsOfManager("alice", "Apply") == "");  // its only field went to carol
  auto conflict = Apply("alice", "  c: 'x'\n");
  BOOST_TEST(GetString(Json(conflict.body), "message") ==
             "Apply failed with 1 conflict: conflict with \"carol\" using v1: .data.c");
  // A patch that changes nothing leaves managedFields (and the RV) alone.
  uint64_t rv = store.CurrentResourceVersion();
  BOOST_TEST(Send("PATCH", std::string(kSettings) + "?fieldManager=dave", R"({"data":{"a":"2"}})",
                  "application/merge-patch+json")
                 .code == 200);
  BOOST_TEST(store.CurrentResourceVersion() == rv);
}

BOOST_AUTO_TEST_CASE(without_field_manager_the_user_agent_names_the_manager) {
  user_agent = "k8sbridge-power/0.9 (linux/amd64)";
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/configmaps",
                  R"({"metadata":{"name":"settings"},"data":{"a":"1"}})")
                 .code == 201);
  BOOST_TEST(FieldsOfManager("k8sbridge-power", "Update") == R"({"f:data":{"f:a":{}}})");
  user_agent = "";
  auto conflict = Apply("alice", "  a: '2'\n");
  BOOST_TEST(GetString(Json(conflict.body), "message") ==
             "Apply failed with 1 conflict: conflict with \"k8sbridge-power\" using v1: .data.a");
}

BOOST_AUTO_TEST_CASE(keyed_list_elements_are_owned_by_key) {
  const std::string pod =
      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n"
      "    image: ";
  const std::string url = "/api/v1/namespaces/default/pods/p?fieldManager=";
  BOOST_TEST(Send("PATCH", url + "alice", pod + "one\n", "application/apply-patch+yaml").code ==
             201);
  auto conflict = Send("PATCH", url + "bob", pod + "two\n", "application/apply-patch+yaml");
  BOOST_TEST(conflict.code == 409);
  BOOST_TEST(GetString(Json(conflict.body), "message") ==
             "Apply failed with 1 conflict: conflict with \"alice\": "
             ".spec.containers[name=\"c\"].image");
}

BOOST_AUTO_TEST_SUITE_END()
