// dryRun=All on every write verb (tests/kubesim/dry_run.h).
#include <boost/test/unit_test.hpp>

#include "api_fixture.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

const char* kPods = "/api/v1/namespaces/default/pods";
const char* kPodBody = R"({"metadata":{"name":"web","labels":{"app":"web"}},)"
                       R"("spec":{"nodeName":"node-0","containers":[{"name":"c","image":"x"}]}})";

// Fails the test when anything was written since `from` (a watch would have seen it).
void ExpectNoChangeSince(Store& store, uint64_t from) {
  BOOST_TEST(store.CurrentResourceVersion() == from);
  auto watcher = store.Watch("", "", from);
  BOOST_REQUIRE(watcher.ok());
  auto next = (*watcher)->Next(std::chrono::milliseconds(0));
  BOOST_REQUIRE(next.ok());
  BOOST_TEST(!next->has_value());
}

struct DryRunFixture : ApiFixture {
  ObjectPtr web;
  uint64_t rv_before = 0;
  DryRunFixture() {
    BOOST_REQUIRE(Send("POST", kPods, kPodBody).code == 201);
    BOOST_REQUIRE(Send("POST", "/api/v1/namespaces/default/configmaps",
                       R"({"metadata":{"name":"cm"},"data":{"a":"1"}})")
                      .code == 201);
    web = Stored("pods", "default", "web");
    rv_before = store.CurrentResourceVersion();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(dry_run, DryRunFixture)

BOOST_AUTO_TEST_CASE(create_validates_and_stores_nothing) {
  auto created =
      Send("POST", std::string(kPods) + "?dryRun=All",
           R"({"metadata":{"name":"new"},"spec":{"containers":[{"name":"c","image":"x"}]}})");
  BOOST_TEST(created.code == 201);
  auto body = Json(created.body);
  BOOST_TEST(GetString(body, "metadata.name") == "new");
  BOOST_TEST(!GetString(body, "metadata.uid").empty());
  BOOST_TEST(GetString(body, "metadata.resourceVersion") == "");
  BOOST_TEST(Stored("pods", "default", "new") == nullptr);
  // The checks of a real create still run.
  BOOST_TEST(Send("POST", std::string(kPods) + "?dryRun=All", kPodBody).code == 409);
  BOOST_TEST(Send("POST", "/api/v1/namespaces/nowhere/configmaps?dryRun=All",
                  R"({"metadata":{"name":"x"}})")
                 .code == 404);
  BOOST_TEST(
      Send("POST", std::string(kPods) + "?dryRun=All",
           R"({"metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"x"}]}})")
          .code == 422);
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_CASE(update_and_status_update_store_nothing) {
  auto put = Send("PUT", "/api/v1/namespaces/default/configmaps/cm?dryRun=All",
                  R"({"metadata":{"name":"cm"},"data":{"a":"2"}})");
  BOOST_TEST(put.code == 200);
  BOOST_TEST(GetString(Json(put.body), "data.a") == "2");
  auto status = Send("PUT", std::string(kPods) + "/web/status?dryRun=All",
                     R"({"metadata":{"name":"web"},"status":{"phase":"Running"}})");
  BOOST_TEST(status.code == 200);
  BOOST_TEST(GetString(Json(status.body), "status.phase") == "Running");
  auto stale = Send("PUT", "/api/v1/namespaces/default/configmaps/cm?dryRun=All",
                    R"({"metadata":{"name":"cm","resourceVersion":"1"},"data":{"a":"3"}})");
  BOOST_TEST(stale.code == 409);
  BOOST_TEST(GetString(*Stored("configmaps", "default", "cm"), "data.a") == "1");
  BOOST_TEST(GetString(*Stored("pods", "default", "web"), "status.phase") == "Pending");
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_CASE(every_patch_type_stores_nothing) {
  const std::pair<const char*, const char*> patches[] = {
      {"application/merge-patch+json", R"({"metadata":{"labels":{"app":"other"}}})"},
      {"application/strategic-merge-patch+json", R"({"metadata":{"labels":{"app":"other"}}})"},
      {"application/json-patch+json",
       R"([{"op":"replace","path":"/metadata/labels/app","value":"other"}])"},
      {"application/apply-patch+yaml",
       "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app: other\n"},
  };
  for (const auto& [type, patch] : patches) {
    auto r = Send("PATCH", std::string(kPods) + "/web?dryRun=All&fieldManager=t&force=true", patch,
                  type);
    BOOST_TEST(r.code == 200, type << ": " << r.body);
    BOOST_TEST(GetString(Json(r.body), "metadata.labels.app") == "other", type);
  }
  auto status = Send("PATCH", std::string(kPods) + "/web/status?dryRun=All",
                     R"({"status":{"phase":"Running"}})", "application/merge-patch+json");
  BOOST_TEST(status.code == 200);
  auto apply_create =
      Send("PATCH", "/api/v1/namespaces/default/configmaps/fresh?dryRun=All&fieldManager=t",
           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\n",
           "application/apply-patch+yaml");
  BOOST_TEST(apply_create.code == 201);
  BOOST_TEST(Stored("configmaps", "default", "fresh") == nullptr);
  BOOST_TEST(GetString(*Stored("pods", "default", "web"), "metadata.labels.app") == "web");
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_CASE(delete_answers_as_a_delete_and_keeps_the_object) {
  // A bound pod: the answer shows the deletionTimestamp a real delete would set.
  auto pod = Send("DELETE", std::string(kPods) + "/web?dryRun=All");
  BOOST_TEST(pod.code == 200);
  BOOST_TEST(!GetString(Json(pod.body), "metadata.deletionTimestamp").empty());
  // kubectl delete --dry-run=server sends the option in the DeleteOptions body.
  auto cm = Send("DELETE", "/api/v1/namespaces/default/configmaps/cm",
                 R"({"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]})");
  BOOST_TEST(cm.code == 200);
  BOOST_TEST(GetString(Json(cm.body), "status") == "Success");
  auto all = Send("DELETE", "/api/v1/namespaces/default/configmaps?dryRun=All");
  BOOST_TEST(all.code == 200);
  // cm and the root-CA publisher's kube-root-ca.crt.
  BOOST_TEST(Json(all.body)["items"].Size() == 2u);
  BOOST_TEST(Send("DELETE", "/api/v1/namespaces/default?dryRun=All").code == 200);
  BOOST_TEST(Send("DELETE", std::string(kPods) + "/nope?dryRun=All").code == 404);
  BOOST_TEST(Stored("configmaps", "default", "cm") != nullptr);
  BOOST_TEST(Stored("namespaces", "", "default") != nullptr);
  BOOST_TEST(Find(*Stored("pods", "default", "web"), "metadata.deletionTimestamp") == nullptr);
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_CASE(eviction_with_dry_run_keeps_the_pod) {
  auto evicted = Send("POST", std::string(kPods) + "/web/eviction?dryRun=All",
                      R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web"}})");
  BOOST_TEST(evicted.code == 201);
  BOOST_TEST(Stored("pods", "default", "web") == web);
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_CASE(unknown_value_is_invalid_for_every_verb) {
  auto create = Send("POST", std::string(kPods) + "?dryRun=true", kPodBody);
  BOOST_TEST(create.code == 422);
  BOOST_TEST(GetString(Json(create.body), "message") ==
             "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
             "[]string{\"true\"}: supported values: \"All\"");
  auto del = Send("DELETE", std::string(kPods) + "/web", R"({"dryRun":["Some"]})");
  BOOST_TEST(del.code == 422);
  BOOST_TEST(GetString(Json(del.body), "message") ==
             "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
             "[]string{\"Some\"}: supported values: \"All\"");
  BOOST_TEST(
      Send("PATCH", std::string(kPods) + "/web?dryRun=x", "{}", "application/merge-patch+json")
          .code == 422);
  BOOST_TEST(Send("PUT", "/api/v1/namespaces/default/configmaps/cm?dryRun=",
                  R"({"metadata":{"name":"cm"}})")
                 .code == 422);
  // Reads ignore it, as upstream.
  BOOST_TEST(Send("GET", std::string(kPods) + "/web?dryRun=x").code == 200);
  ExpectNoChangeSince(store, rv_before);
}

BOOST_AUTO_TEST_SUITE_END()
