// Finalizers, propagationPolicy and the garbage collector (tests/kubesim/finalizers.h).
#include <boost/test/unit_test.hpp>

#include "api_fixture.h"
#include "finalizers.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

const char* kConfigMaps = "/api/v1/namespaces/default/configmaps";

struct GcFixture : ApiFixture {
  // Creates a ConfigMap, optionally owned by `owner` (a ConfigMap), and returns its uid.
  std::string MakeConfigMap(const std::string& name, const std::string& owner = "",
                            bool block = false, const std::string& finalizers = "") {
    std::string meta = R"("name":")" + name + "\"";
    if (!owner.empty()) {
      meta += R"(,"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":")" + owner +
              R"(","uid":")" + Uid(owner) + R"(","blockOwnerDeletion":)" +
              (block ? "true" : "false") + "}]";
    }
    if (!finalizers.empty())
      meta += R"(,"finalizers":[)" + finalizers + "]";
    auto created = Send("POST", kConfigMaps, R"({"metadata":{)" + meta + "}}");
    BOOST_REQUIRE_MESSAGE(created.code == 201, created.body);
    return GetString(Json(created.body), "metadata.uid");
  }
  std::string Uid(const std::string& name) {
    ObjectPtr cm = Stored("configmaps", "default", name);
    return cm == nullptr ? "" : GetString(*cm, "metadata.uid");
  }
  bool Exists(const std::string& name) { return Stored("configmaps", "default", name) != nullptr; }
  ApiResponse DeleteWith(const std::string& name, const std::string& policy) {
    return Send(
        "DELETE", std::string(kConfigMaps) + "/" + name,
        R"({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":")" + policy + "\"}");
  }
  void CollectUntilStable() {
    for (int i = 0; i < 5; ++i)
      CollectGarbage(store);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(finalizers, GcFixture)

BOOST_AUTO_TEST_CASE(a_finalizer_holds_deletion_until_an_update_removes_it) {
  MakeConfigMap("held", "", false, R"("example.com/hold")");
  auto deleted = Send("DELETE", std::string(kConfigMaps) + "/held");
  BOOST_TEST(deleted.code == 200);
  auto answer = Json(deleted.body);
  BOOST_TEST(GetString(answer, "kind") == "ConfigMap");  // the object, not a Status
  BOOST_TEST(!GetString(answer, "metadata.deletionTimestamp").empty());
  BOOST_TEST(Find(answer, "metadata.deletionGracePeriodSeconds")->GetInt64() == 0);
  BOOST_REQUIRE(Exists("held"));
  // No new finalizer once deletion has started.
  auto added = Send("PATCH", std::string(kConfigMaps) + "/held",
                    R"({"metadata":{"finalizers":["example.com/hold","example.com/more"]}})",
                    "application/merge-patch+json");
  BOOST_TEST(added.code == 422);
  BOOST_TEST(GetString(Json(added.body), "message")
                 .find("no new finalizers can be added if the object is being deleted, found new "
                       "finalizers []string{\"example.com/more\"}") != std::string::npos);
  // Removing the last finalizer deletes it; the answer is the updated object.
  auto released = Send("PATCH", std::string(kConfigMaps) + "/held",
                       R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
  BOOST_TEST(released.code == 200);
  BOOST_TEST(!Exists("held"));
}

BOOST_AUTO_TEST_CASE(a_terminated_pod_with_a_finalizer_stays_until_it_is_removed) {
  auto pod = PodJson("p", R"(,"finalizers":["example.com/hold"])", "node-0");
  BOOST_REQUIRE(store.Create("pods", "default", std::move(pod)).ok());
  store.RegisterKubelet("node-0");
  BOOST_REQUIRE(store.Delete("pods", "default", "p").ok());
  BOOST_REQUIRE(store.FinalizePodDeletion("default", "p").ok());  // the kubelet is done
  ObjectPtr kept = Stored("pods", "default", "p");
  BOOST_REQUIRE(kept != nullptr);
  BOOST_TEST(Find(*kept, "metadata.deletionGracePeriodSeconds")->GetInt64() == 0);
  BOOST_TEST(Send("PATCH", "/api/v1/namespaces/default/pods/p", R"({"metadata":{"finalizers":[]}})",
                  "application/merge-patch+json")
                 .code == 200);
  BOOST_TEST(Stored("pods", "default", "p") == nullptr);
}

BOOST_AUTO_TEST_CASE(foreground_deletes_blocking_dependents_first) {
  MakeConfigMap("owner");
  MakeConfigMap("blocking", "owner", true);
  MakeConfigMap("loose", "owner", false);
  auto deleted = DeleteWith("owner", "Foreground");
  BOOST_TEST(deleted.code == 200);
  auto answer = Json(deleted.body);
  BOOST_TEST(ToJson(*Find(answer, "metadata.finalizers")) == R"(["foregroundDeletion"])");
  BOOST_REQUIRE(Exists("owner"));
  CollectGarbage(store);  // deletes the blocking dependent; the owner still waits
  BOOST_TEST(!Exists("blocking"));
  BOOST_TEST(Exists("owner"));
  CollectUntilStable();
  BOOST_TEST(!Exists("owner"));
  BOOST_TEST(!Exists("loose"));  // collected in the background once its owner was gone
}

BOOST_AUTO_TEST_CASE(background_deletes_the_owner_then_collects_dependents) {
  MakeConfigMap("owner");
  MakeConfigMap("child", "owner", true);
  MakeConfigMap("grandchild", "child", false);
  BOOST_TEST(DeleteWith("owner", "Background").code == 200);
  BOOST_TEST(!Exists("owner"));
  BOOST_TEST(Exists("child"));
  CollectUntilStable();
  BOOST_TEST(!Exists("child"));
  BOOST_TEST(!Exists("grandchild"));
}

BOOST_AUTO_TEST_CASE(orphan_removes_the_owner_references_and_keeps_dependents) {
  MakeConfigMap("owner");
  MakeConfigMap("child", "owner", true);
  auto deleted = DeleteWith("owner", "Orphan");
  BOOST_TEST(ToJson(*Find(Json(deleted.body), "metadata.finalizers")) == R"(["orphan"])");
  CollectUntilStable();
  BOOST_TEST(!Exists("owner"));
  BOOST_REQUIRE(Exists("child"));
  BOOST_TEST(Find(*Stored("configmaps", "default", "child"), "metadata.ownerReferences") ==
             nullptr);
}

BOOST_AUTO_TEST_CASE(dependents_of_gone_or_unknown_owners) {
  MakeConfigMap("owner");
  MakeConfigMap("two-owners", "owner");
  MakeConfigMap("other");
  // A second owner that stays; a reference to a kind kubesim does not serve is kept.
  BOOST_REQUIRE(Send("PATCH", std::string(kConfigMaps) + "/two-owners",
                     R"({"metadata":{"ownerReferences":[)"
                     R"({"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":")" +
                         Uid("owner") +
                         R"("},)"
                         R"({"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":")" +
                         Uid("other") + R"("}]}})",
                     "application/merge-patch+json")
                    .code == 200);
  BOOST_REQUIRE(Send("POST", kConfigMaps,
                     R"({"metadata":{"name":"by-deployment","ownerReferences":[{"apiVersion":)"
                     R"("widgets.example.com/v1","kind":"Widget","name":"d","uid":"nowhere"}]}})")
                    .code == 201);
  BOOST_TEST(Send("DELETE", std::string(kConfigMaps) + "/owner").code == 200);
  CollectUntilStable();
  BOOST_REQUIRE(Exists("two-owners"));  // a solid owner remains: only the dangling ref goes
  auto refs = Find(*Stored("configmaps", "default", "two-owners"), "metadata.ownerReferences");
  BOOST_REQUIRE(refs != nullptr);
  BOOST_TEST(refs->Size() == 1u);
  BOOST_TEST(GetString((*refs)[0], "name") == "other");
  BOOST_TEST(Exists("by-deployment"));
}

BOOST_AUTO_TEST_CASE(bad_propagation_policies_are_invalid) {
  MakeConfigMap("cm");
  auto bad = DeleteWith("cm", "Sideways");
  BOOST_TEST(bad.code == 422);
  BOOST_TEST(GetString(Json(bad.body), "message") ==
             "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: "
             "\"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
  auto both = Send("DELETE", std::string(kConfigMaps) + "/cm",
                   R"({"orphanDependents":true,"propagationPolicy":"Orphan"})");
  BOOST_TEST(both.code == 422);
  BOOST_TEST(Send("DELETE", std::string(kConfigMaps) + "/cm?propagationPolicy=x").code == 422);
  BOOST_TEST(Exists("cm"));
}

BOOST_AUTO_TEST_CASE(dry_run_delete_with_a_policy_changes_nothing) {
  MakeConfigMap("owner");
  MakeConfigMap("child", "owner", true);
  uint64_t rv = store.CurrentResourceVersion();
  auto dry = Send("DELETE", std::string(kConfigMaps) + "/owner",
                  R"({"propagationPolicy":"Foreground","dryRun":["All"]})");
  // With a body, the query is not read (upstream decodes one or the other).
  BOOST_TEST(Send("DELETE", std::string(kConfigMaps) + "/child?dryRun=All", "{}").code == 200);
  BOOST_TEST(!Exists("child"));
  MakeConfigMap("child", "owner", true);
  rv = store.CurrentResourceVersion();
  BOOST_TEST(dry.code == 200);
  BOOST_TEST(!GetString(Json(dry.body), "metadata.deletionTimestamp").empty());
  CollectUntilStable();
  BOOST_TEST(Exists("owner"));
  BOOST_TEST(Exists("child"));
  BOOST_TEST(store.CurrentResourceVersion() == rv);
}

BOOST_AUTO_TEST_SUITE_END()
