#include <thread>

#include <boost/test/unit_test.hpp>

#include "api.h"
#include "api_fixture.h"
#include "fake_clock.h"
#include "k8sbridge/clock.h"
#include "nodes.h"
#include "store.h"
#include "test_util.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

struct Fixture : ApiFixture {
  ApiResponse Call(const std::string& method, const std::string& target,
                   const std::string& body = "",
                   const std::string& content_type = "application/json",
                   const std::string& accept = "application/json") {
    return Send(method, target, body, content_type, accept);
  }

  rapidjson::Document Body(const ApiResponse& r) { return Json(r.body); }
};

const char* kPod =
    R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},
                       "spec":{"containers":[{"name":"c","image":"x"}]}})";

}  // namespace

BOOST_FIXTURE_TEST_SUITE(api, Fixture)

BOOST_AUTO_TEST_CASE(discovery_documents) {
  auto versions = Body(Call("GET", "/api"));
  BOOST_TEST(GetString(versions, "kind") == "APIVersions");
  auto core = Body(Call("GET", "/api/v1"));
  BOOST_TEST(GetString(core, "groupVersion") == "v1");
  std::set<std::string> names;
  for (const auto& r : core["resources"].GetArray())
    names.insert(GetString(r, "name"));
  for (const char* n : {"pods", "pods/status", "pods/binding", "nodes", "nodes/status",
                        "namespaces", "configmaps", "secrets", "events"}) {
    BOOST_TEST(names.count(n) == 1u, n);
  }
  auto groups = Body(Call("GET", "/apis"));
  // events.k8s.io, coordination.k8s.io, policy, apps, batch, storage.k8s.io,
  // rbac.authorization.k8s.io, authorization.k8s.io, authentication.k8s.io
  BOOST_TEST(groups["groups"].Size() == 9u);
  BOOST_TEST(GetString(Body(Call("GET", "/apis/coordination.k8s.io/v1")), "groupVersion") ==
             "coordination.k8s.io/v1");
  BOOST_TEST(GetString(Body(Call("GET", "/version")), "minor") == "32");
  BOOST_TEST(Call("GET", "/apis/widgets.example.com/v1").code == 404);
  BOOST_TEST(Call("GET", "/api/v1/widgets").code == 404);
  auto openapi = Body(Call("GET", "/openapi/v3"));
  BOOST_TEST(Find(openapi, "paths") != nullptr);
}

BOOST_AUTO_TEST_CASE(create_get_and_errors_are_status_objects) {
  auto created = Call("POST", "/api/v1/namespaces/default/pods", kPod);
  BOOST_TEST(created.code == 201);
  BOOST_TEST(GetString(Body(created), "metadata.namespace") == "default");
  auto dup = Call("POST", "/api/v1/namespaces/default/pods", kPod);
  BOOST_TEST(dup.code == 409);
  auto status = Body(dup);
  BOOST_TEST(GetString(status, "kind") == "Status");
  BOOST_TEST(GetString(status, "reason") == "AlreadyExists");
  BOOST_TEST(GetString(status, "message") == "pods \"web\" already exists");
  BOOST_TEST(GetString(status, "details.kind") == "pods");
  BOOST_TEST(GetString(status, "details.name") == "web");
  auto missing = Call("GET", "/api/v1/namespaces/default/pods/nope");
  BOOST_TEST(missing.code == 404);
  BOOST_TEST(GetString(Body(missing), "reason") == "NotFound");
  auto bad = Call("POST", "/api/v1/namespaces/default/pods", "{not json");
  BOOST_TEST(bad.code == 400);
  auto invalid = Call("POST", "/api/v1/namespaces/default/pods",
                      R"({"metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c"}]}})");
  BOOST_TEST(invalid.code == 422);
  BOOST_TEST(GetString(Body(invalid), "reason") == "Invalid");
  auto over_limit =
      Call("POST", "/api/v1/namespaces/default/pods",
           R"({"metadata":{"name":"big"},"spec":{"containers":[{"name":"c",)"
           R"("image":"x","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}]}})");
  BOOST_TEST(over_limit.code == 422);
  BOOST_TEST(GetString(Body(over_limit), "message") ==
             "Pod \"big\" is invalid: spec.containers[0].resources.requests: Invalid value: "
             "\"2\": must be less than or equal to cpu limit of 1");
  auto other_ns = Call(
      "POST", "/api/v1/namespaces/default/pods",
      R"({"metadata":{"name":"x","namespace":"kube-system"},"spec":{"containers":[{"name":"c"}]}})");
  BOOST_TEST(other_ns.code == 400);
  // JSON sent as protobuf: not a protobuf message (no "k8s\0" magic), 400 as upstream's
  // protobuf decoder answers.
  BOOST_TEST(
      Call("POST", "/api/v1/namespaces/default/pods", kPod, "application/vnd.kubernetes.protobuf")
          .code == 400);
}

BOOST_AUTO_TEST_CASE(lists_carry_items_and_page) {
  auto empty = Body(Call("GET", "/api/v1/namespaces/default/configmaps"));
  BOOST_TEST(GetString(empty, "kind") == "ConfigMapList");
  BOOST_REQUIRE(empty["items"].IsArray());
  BOOST_TEST(empty["items"].Size() == 0u);
  for (int i = 0; i < 5; ++i) {
    Call("POST", "/api/v1/namespaces/default/configmaps",
         R"({"metadata":{"name":"c)" + std::to_string(i) + R"("}})");
  }
  std::vector<std::string> names;
  std::string cont;
  std::string rv;
  do {
    auto page = Body(Call("GET", "/api/v1/namespaces/default/configmaps?limit=2" +
                                     (cont.empty() ? "" : "&continue=" + cont)));
    for (const auto& item : page["items"].GetArray())
      names.push_back(GetString(item, "metadata.name"));
    if (rv.empty())
      rv = GetString(page, "metadata.resourceVersion");
    BOOST_TEST(GetString(page, "metadata.resourceVersion") == rv);  // same RV on every page
    cont = GetString(page, "metadata.continue");
  } while (!cont.empty());
  BOOST_TEST(names == (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4"}));
  auto first = Body(Call("GET", "/api/v1/namespaces/default/configmaps?limit=2"));
  Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"later"}})");
  store.CompactHistory();  // the token's RV is now older than the history
  auto expired = Call("GET", "/api/v1/namespaces/default/configmaps?limit=2&continue=" +
                                 GetString(first, "metadata.continue"));
  BOOST_TEST(expired.code == 410);
  BOOST_TEST(GetString(Body(expired), "reason") == "Expired");
  BOOST_TEST(Call("GET", "/api/v1/nodes?labelSelector=a%20in%20(").code == 400);
  BOOST_TEST(Call("GET", "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx").code == 400);
  auto leaf1 =
      Body(Call("GET", "/api/v1/nodes?labelSelector=network.topology.nvidia.com%2Fleaf%3Dleaf-1"));
  BOOST_TEST(leaf1["items"].Size() == 2u);
}

BOOST_AUTO_TEST_CASE(pages_with_a_selector_start_after_the_token_and_miss_nothing) {
  // Matching and other objects interleaved, and a page ending on the last match.
  for (int i = 0; i < 9; ++i) {
    Call("POST", "/api/v1/namespaces/default/configmaps",
         R"({"metadata":{"name":"m)" + std::to_string(i) + R"(","labels":{"pick":")" +
             (i % 3 == 0 ? "no" : "yes") + R"("}}})");
  }
  std::vector<std::string> names;
  std::string cont;
  int pages = 0;
  do {
    auto page = Body(Call("GET",
                          "/api/v1/namespaces/default/configmaps?labelSelector=pick%3Dyes"
                          "&limit=2" +
                              (cont.empty() ? "" : "&continue=" + cont)));
    ++pages;
    for (const auto& item : page["items"].GetArray())
      names.push_back(GetString(item, "metadata.name"));
    BOOST_TEST(!page["metadata"].HasMember("remainingItemCount"));  // never with a selector
    cont = GetString(page, "metadata.continue");
  } while (!cont.empty());
  BOOST_TEST(names == (std::vector<std::string>{"m1", "m2", "m4", "m5", "m7", "m8"}));
  BOOST_TEST(pages == 3);  // the last page is full and says no more follow
  auto first = Body(Call("GET", "/api/v1/namespaces/default/configmaps?limit=4"));
  BOOST_TEST(first["metadata"]["remainingItemCount"].GetInt() == 5);
}

BOOST_AUTO_TEST_CASE(put_conflicts_on_stale_rv) {
  auto created =
      Body(Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"c"}})"));
  std::string rv = GetString(created, "metadata.resourceVersion");
  std::string body =
      R"({"metadata":{"name":"c","resourceVersion":")" + rv + R"("},"data":{"a":"b"}})";
  BOOST_TEST(Call("PUT", "/api/v1/namespaces/default/configmaps/c", body).code == 200);
  auto stale = Call("PUT", "/api/v1/namespaces/default/configmaps/c", body);
  BOOST_TEST(stale.code == 409);
  BOOST_TEST(GetString(Body(stale), "reason") == "Conflict");
}

BOOST_AUTO_TEST_CASE(patch_types) {
  Call("POST", "/api/v1/namespaces/default/pods", kPod);
  auto merged = Call("PATCH", "/api/v1/namespaces/default/pods/web",
                     R"({"metadata":{"labels":{"x":"1"}}})", "application/merge-patch+json");
  BOOST_TEST(merged.code == 200);
  BOOST_TEST(GetString(Body(merged), "metadata.labels.x") == "1");
  auto failed_test = Call("PATCH", "/api/v1/namespaces/default/pods/web",
                          R"([{"op":"test","path":"/metadata/labels/x","value":"2"}])",
                          "application/json-patch+json");
  BOOST_TEST(failed_test.code == 422);
  auto smp = Call("PATCH", "/api/v1/nodes/node-0", R"({"spec":{"unschedulable":true}})",
                  "application/strategic-merge-patch+json");
  BOOST_TEST(smp.code == 200);
  BOOST_TEST(Body(smp)["spec"]["unschedulable"].GetBool());
  BOOST_TEST(Call("PATCH", "/api/v1/nodes/node-0", "{}", "text/plain").code == 415);
  auto precondition = Call("PATCH", "/api/v1/namespaces/default/pods/web",
                           R"({"metadata":{"resourceVersion":"1","labels":{"y":"1"}}})",
                           "application/merge-patch+json");
  BOOST_TEST(precondition.code == 409);
  auto no_manager = Call("PATCH", "/api/v1/namespaces/default/configmaps/new", "data: {a: b}",
                         "application/apply-patch+yaml");
  BOOST_TEST(no_manager.code == 422);
  auto applied =
      Call("PATCH", "/api/v1/namespaces/default/configmaps/new?fieldManager=me&force=true",
           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\ndata:\n  a: b\n",
           "application/apply-patch+yaml");
  BOOST_TEST(applied.code == 201);
  auto reapplied = Call("PATCH", "/api/v1/namespaces/default/configmaps/new?fieldManager=me",
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\ndata:\n  c: d\n",
                        "application/apply-patch+yaml");
  BOOST_TEST(reapplied.code == 200);
  // "a" was this manager's alone and is no longer applied: it goes (managed_fields.h).
  BOOST_TEST(ToJson(Body(reapplied)["data"]) == R"({"c":"d"})");
  auto status_patch = Call("PATCH", "/api/v1/namespaces/default/pods/web/status",
                           R"({"status":{"phase":"Running"},"spec":{"nodeName":"sneaky"}})",
                           "application/merge-patch+json");
  BOOST_TEST(GetString(Body(status_patch), "status.phase") == "Running");
  BOOST_TEST(GetString(Body(status_patch), "spec.nodeName") == "");
}

// A list by spec.nodeName is served from an index of the pods by node (as the API
// server's watch cache serves it): the same pods, in order and in pages, as it follows
// creates, bindings and deletes, in one namespace and in all.
BOOST_AUTO_TEST_CASE(pods_by_node_name_follow_bindings_and_deletes) {
  Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"other"}})");
  auto names = [&](const std::string& target) {
    auto body = Body(Call("GET", target));
    std::string out;
    for (const auto& item : body["items"].GetArray())
      out += GetString(item, "metadata.namespace") + "/" + GetString(item, "metadata.name") + " ";
    return out;
  };
  auto pod = [&](const std::string& ns, const std::string& name, const std::string& node) {
    BOOST_TEST(Call("POST", "/api/v1/namespaces/" + ns + "/pods",
                    ToJson(PodJson(name, R"(,"labels":{"app":"a"})", node)))
                   .code == 201);
  };
  pod("default", "b", "node-1");
  pod("default", "a", "node-1");
  pod("other", "c", "node-1");
  pod("default", "d", "node-2");
  pod("default", "unbound", "");
  const std::string all = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1";
  BOOST_TEST(names(all) == "default/a default/b other/c ");
  BOOST_TEST(names("/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1") ==
             "default/a default/b ");
  BOOST_TEST(names("/api/v1/pods?fieldSelector=spec.nodeName%3D") == "default/unbound ");
  BOOST_TEST(names(all + "&labelSelector=app%3Dnone").empty());
  BOOST_TEST(names("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-9").empty());

  auto first = Body(Call("GET", all + "&limit=2"));
  BOOST_TEST(first["items"].Size() == 2u);
  const std::string token = GetString(first, "metadata.continue");
  BOOST_REQUIRE(!token.empty());
  BOOST_TEST(names(all + "&limit=2&continue=" + token) == "other/c ");

  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/pods/unbound/binding",
                  R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"unbound"},)"
                  R"("target":{"kind":"Node","name":"node-1"}})")
                 .code == 201);
  BOOST_TEST(names("/api/v1/pods?fieldSelector=spec.nodeName%3D").empty());
  BOOST_TEST(Call("DELETE", "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0").code == 200);
  BOOST_TEST(names(all) == "default/b default/unbound other/c ");
  BOOST_TEST(names("/api/v1/pods?fieldSelector=spec.nodeName!%3Dnode-1") == "default/d ");
  BOOST_TEST(Call("DELETE", "/api/v1/namespaces/other").code == 200);
  BOOST_TEST(names(all) == "default/b default/unbound ");
}

BOOST_AUTO_TEST_CASE(binding_and_delete_codes) {
  Call("POST", "/api/v1/namespaces/default/pods", kPod);
  auto bound = Call(
      "POST", "/api/v1/namespaces/default/pods/web/binding",
      R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"web"},"target":{"kind":"Node","name":"node-1"}})");
  BOOST_TEST(bound.code == 201);
  BOOST_TEST(GetString(Body(Call("GET", "/api/v1/namespaces/default/pods/web")), "spec.nodeName") ==
             "node-1");
  auto pending = Call("DELETE", "/api/v1/namespaces/default/pods/web",
                      R"({"gracePeriodSeconds":30,"orphanDependents":false})");
  BOOST_TEST(pending.code == 202);
  BOOST_TEST(!GetString(Body(pending), "metadata.deletionTimestamp").empty());
  auto now = Call("DELETE", "/api/v1/namespaces/default/pods/web?gracePeriodSeconds=0");
  BOOST_TEST(now.code == 200);
  Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"c"}})");
  auto bad_pre = Call("DELETE", "/api/v1/namespaces/default/configmaps/c",
                      R"({"preconditions":{"uid":"not-it"}})");
  BOOST_TEST(bad_pre.code == 409);
  auto gone = Call("DELETE", "/api/v1/namespaces/default/configmaps/c");
  BOOST_TEST(gone.code == 200);
  BOOST_TEST(GetString(Body(gone), "status") == "Success");
}

BOOST_AUTO_TEST_CASE(eviction_marks_disruption_target_then_deletes) {
  Call(
      "POST", "/api/v1/namespaces/default/pods",
      R"({"metadata":{"name":"e"},"spec":{"nodeName":"node-0","containers":[{"name":"c","image":"x"}]}})");
  auto evicted = Call("POST", "/api/v1/namespaces/default/pods/e/eviction",
                      R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"e"},
                          "deleteOptions":{"gracePeriodSeconds":20}})");
  BOOST_TEST(evicted.code == 201);
  auto pod = Body(Call("GET", "/api/v1/namespaces/default/pods/e"));
  BOOST_TEST(!GetString(pod, "metadata.deletionTimestamp").empty());
  BOOST_TEST(GetString(pod["status"]["conditions"][0], "type") == "DisruptionTarget");
  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/pods/missing/eviction",
                  R"({"metadata":{"name":"missing"}})")
                 .code == 404);
}

BOOST_AUTO_TEST_CASE(events_convert_between_groups) {
  auto created = Call(
      "POST", "/apis/events.k8s.io/v1/namespaces/default/events",
      R"({"metadata":{"name":"e"},"note":"hi","regarding":{"kind":"Pod","name":"p","namespace":"default"},
                          "reportingController":"me","reportingInstance":"me-1","action":"A","reason":"R","type":"Normal","eventTime":"2026-01-01T00:00:00.000000Z"})");
  BOOST_TEST(created.code == 201);
  BOOST_TEST(GetString(Body(created), "apiVersion") == "events.k8s.io/v1");
  BOOST_TEST(GetString(Body(created), "note") == "hi");
  auto core = Body(Call("GET", "/api/v1/namespaces/default/events/e"));
  BOOST_TEST(GetString(core, "apiVersion") == "v1");
  BOOST_TEST(GetString(core, "message") == "hi");
  BOOST_TEST(GetString(core, "involvedObject.name") == "p");
  BOOST_TEST(GetString(core, "reportingComponent") == "me");
}

BOOST_AUTO_TEST_CASE(table_output_for_kubectl) {
  Call("POST", "/api/v1/namespaces/default/pods", kPod);
  auto table = Body(Call("GET", "/api/v1/namespaces/default/pods", "", "",
                         "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
  BOOST_TEST(GetString(table, "kind") == "Table");
  BOOST_TEST(GetString(table["columnDefinitions"][0], "name") == "Name");
  BOOST_TEST(ToJson(table["rows"][0]["cells"]) ==
             R"(["web","0/1","Pending","0","0s","<none>","<none>","<none>","<none>"])");
  BOOST_TEST(GetString(table["rows"][0]["object"], "metadata.name") == "web");
}

BOOST_AUTO_TEST_CASE(a_bookmark_comes_before_the_watch_timeout) {
  // Bookmarks come every minute (hooks' default) and once 2 s before the timeout, as
  // from a real API server's watch cache: a 3 s watch gets that one.
  ApiRequest req;
  req.method = "GET";
  req.path = "/api/v1/namespaces";
  req.query = ParseQuery("watch=1&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=3");
  Route route;
  ApiResponse error;
  BOOST_REQUIRE(api.ResolveRoute(req, route, error));
  std::vector<std::string> lines;
  Api::WatchHooks hooks;
  hooks.fail = [&](const ApiResponse& r) { BOOST_FAIL("watch failed: " + r.body); };
  hooks.begin = [] {};
  hooks.write = [&](const std::string& chunk) {
    lines.push_back(chunk);
    return true;
  };
  hooks.stopping = [] { return false; };
  hooks.stalled = [] { return false; };
  BOOST_TEST(hooks.bookmark_interval == std::chrono::milliseconds(60000));
  api.Watch(req, route, hooks);
  BOOST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.back().find(R"({"type":"BOOKMARK")") == 0u);
  BOOST_TEST(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
               return l.find("BOOKMARK") != std::string::npos;
             }) == 1);
}

BOOST_AUTO_TEST_CASE(watch_streams_with_selectors_bookmarks_and_expiry) {
  Call("POST", "/api/v1/namespaces/default/pods", kPod);
  ApiRequest req;
  req.method = "GET";
  req.path = "/api/v1/namespaces/default/pods";
  req.query =
      ParseQuery("watch=1&labelSelector=app%3Dweb&allowWatchBookmarks=true&timeoutSeconds=5");
  Route route;
  ApiResponse error;
  BOOST_REQUIRE(api.ResolveRoute(req, route, error));
  BOOST_TEST(route.verb == "watch");
  std::vector<std::string> lines;
  std::atomic<bool> stop{false};
  Api::WatchHooks hooks;
  hooks.fail = [&](const ApiResponse& r) { BOOST_FAIL("watch failed: " + r.body); };
  hooks.begin = [] {};
  hooks.write = [&](const std::string& chunk) {
    lines.push_back(chunk);
    // After the synthetic ADDED: relabel (-> DELETED for this selector), then stop
    // once a BOOKMARK came.
    if (lines.size() == 1) {
      Call("PATCH", "/api/v1/namespaces/default/pods/web",
           R"({"metadata":{"labels":{"app":"db"}}})", "application/merge-patch+json");
    }
    if (chunk.find("BOOKMARK") != std::string::npos)
      stop = true;
    return true;
  };
  hooks.stopping = [&] { return stop.load(); };
  hooks.stalled = [] { return false; };
  hooks.bookmark_interval = std::chrono::milliseconds(10);
  api.Watch(req, route, hooks);
  BOOST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0].find(R"({"type":"ADDED")") == 0u);
  BOOST_TEST(lines[1].find(R"({"type":"DELETED")") == 0u);
  BOOST_TEST(lines[1].find(R"("app":"db")") != std::string::npos);
  BOOST_TEST(lines[2].find(R"({"type":"BOOKMARK","object":{"kind":"Pod")") == 0u);
  BOOST_TEST(lines[0].back() == '\n');

  // Too old an RV: the stream never starts, the answer is a 410 Status.
  store.CompactHistory();
  req.query = ParseQuery("watch=1&resourceVersion=1");
  int failed = 0;
  hooks.fail = [&](const ApiResponse& r) { failed = r.code; };
  api.Watch(req, route, hooks);
  BOOST_TEST(failed == 410);

  // The mid-stream 410 fault: backlog, then an ERROR event.
  lines.clear();
  req.query = ParseQuery("watch=1");
  hooks.expire_after_backlog = true;
  api.Watch(req, route, hooks);
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[1].find(R"({"type":"ERROR","object":{"kind":"Status")") == 0u);
  BOOST_TEST(lines[1].find(R"("code":410)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(fake_nodes_and_node_files) {
  auto nodes = Body(Call("GET", "/api/v1/nodes"));
  BOOST_REQUIRE(nodes["items"].Size() == 4u);
  const auto& n0 = nodes["items"][0];
  BOOST_TEST(GetString(n0["status"]["allocatable"], "cpu") == "64");
  BOOST_TEST(n0["status"]["allocatable"].HasMember("nvidia.com/gpu"));
  BOOST_TEST(std::string(n0["metadata"]["labels"]["kubernetes.io/hostname"].GetString()) ==
             "node-0");
  auto loaded = LoadNodes(
      "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n---\n"
      "kind: List\nitems:\n- kind: Node\n  metadata: {name: b}\n"
      "  status: {capacity: {cpu: '4'}}\n");
  BOOST_REQUIRE(loaded.ok());
  BOOST_TEST(loaded->size() == 2u);
  BOOST_TEST(GetString((*(*loaded)[1])["status"]["allocatable"], "cpu") == "4");
  BOOST_TEST(!LoadNodes("kind: Pod\nmetadata: {name: x}\n").ok());
  BOOST_TEST(!LoadNodes("kind: Node\nmetadata: {}\n").ok());
}

BOOST_AUTO_TEST_SUITE_END()
