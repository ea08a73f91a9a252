#include <future>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "finalizers.h"
#include "k8sbridge/clock.h"
#include "store.h"
#include "test_util.h"

using namespace kubesim;
using namespace kubesim::testing;
using k8sbridge::FakeClock;

namespace {

struct Fixture {
  FakeClock clock;
  Store store{clock, 50};
  Fixture() { CreateNamespace(store, "default"); }
};

// rapidjson offers the allocator of a non-const document only; nothing is changed.
size_t AllocatorCapacity(const ObjectPtr& o) {
  return const_cast<rapidjson::Document&>(*o).GetAllocator().Capacity();
}

uint64_t Rv(const ObjectPtr& o) {
  return std::stoull(GetString(*o, "metadata.resourceVersion"));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(store, Fixture)

BOOST_AUTO_TEST_CASE(create_fills_identity_and_rejects_duplicates) {
  auto created = store.Create("pods", "default", PodJson("a"));
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(!GetString(**created, "metadata.uid").empty());
  BOOST_TEST(GetString(**created, "metadata.creationTimestamp") == "2027-01-15T08:00:00Z");
  BOOST_TEST(GetString(**created, "metadata.namespace") == "default");
  BOOST_TEST(GetString(**created, "status.phase") == "Pending");
  auto again = store.Create("pods", "default", PodJson("a"));
  BOOST_TEST((again.status().code() == Status::Code::kAlreadyExists));
  BOOST_TEST(again.status().message() == "pods \"a\" already exists");
  auto no_ns = store.Create("pods", "nowhere", PodJson("b"));
  BOOST_TEST((no_ns.status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(generate_name_makes_distinct_names) {
  auto a = store.Create("configmaps", "default", Json(R"({"metadata":{"generateName":"x-"}})"));
  auto b = store.Create("configmaps", "default", Json(R"({"metadata":{"generateName":"x-"}})"));
  BOOST_REQUIRE(a.ok() && b.ok());
  std::string na = GetString(**a, "metadata.name"), nb = GetString(**b, "metadata.name");
  BOOST_TEST(na.rfind("x-", 0) == 0);
  BOOST_TEST(na.size() == 7u);
  BOOST_TEST(na != nb);
  auto none = store.Create("configmaps", "default", Json(R"({"metadata":{}})"));
  BOOST_TEST((none.status().code() == Status::Code::kInvalidArgument));
}

BOOST_AUTO_TEST_CASE(one_global_counter_increases_on_every_write) {
  uint64_t start = store.CurrentResourceVersion();
  auto a = store.Create("pods", "default", PodJson("a"));
  auto b = store.Create("configmaps", "default", Json(R"({"metadata":{"name":"c"}})"));
  BOOST_TEST(Rv(*a) == start + 1);
  BOOST_TEST(Rv(*b) == start + 2);
  auto m = store.Mutate("pods", "default", "a", [](rapidjson::Document& d) {
    SetMember(d, "metadata.labels.x", rapidjson::Value("y"));
    return Status::Ok();
  });
  BOOST_TEST(Rv(*m) == start + 3);
  // A no-op mutation writes nothing.
  auto same =
      store.Mutate("pods", "default", "a", [](rapidjson::Document&) { return Status::Ok(); });
  BOOST_TEST(Rv(*same) == start + 3);
  BOOST_TEST(store.CurrentResourceVersion() == start + 3);
}

BOOST_AUTO_TEST_CASE(update_with_stale_rv_conflicts) {
  auto a =
      store.Create("configmaps", "default", Json(R"({"metadata":{"name":"c"},"data":{"k":"1"}})"));
  std::string rv = GetString(**a, "metadata.resourceVersion");
  auto u1 = store.Update(
      "configmaps", "default", "c",
      Json(R"({"metadata":{"name":"c","resourceVersion":")" + rv + R"("},"data":{"k":"2"}})"));
  BOOST_REQUIRE(u1.ok());
  BOOST_TEST(GetString(**u1, "metadata.uid") == GetString(**a, "metadata.uid"));
  auto u2 = store.Update(
      "configmaps", "default", "c",
      Json(R"({"metadata":{"name":"c","resourceVersion":")" + rv + R"("},"data":{"k":"3"}})"));
  BOOST_TEST((u2.status().code() == Status::Code::kConflict));
  auto missing = store.Update("configmaps", "default", "nope", Json(R"({"metadata":{}})"));
  BOOST_TEST((missing.status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(status_update_keeps_spec_and_spec_update_keeps_status) {
  store.Create("pods", "default", PodJson("a"));
  auto s = store.Update(
      "pods", "default", "a",
      Json(R"({"metadata":{"name":"a"},"spec":{"containers":[]},"status":{"phase":"Running"}})"),
      /*status_only=*/true);
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(GetString(**s, "status.phase") == "Running");
  BOOST_TEST((*s)->operator[]("spec")["containers"].Size() == 1u);
  auto u = store.Update(
      "pods", "default", "a",
      Json(
          R"({"metadata":{"name":"a","labels":{"l":"1"}},"spec":{"containers":[{"name":"c","image":"y"}]},"status":{"phase":"Failed"}})"));
  BOOST_REQUIRE(u.ok());
  BOOST_TEST(GetString(**u, "status.phase") == "Running");
  BOOST_TEST(GetString(**u, "metadata.labels.l") == "1");
}

BOOST_AUTO_TEST_CASE(bind_sets_node_and_condition_once) {
  store.Create("pods", "default", PodJson("a"));
  auto b = store.BindPod("default", "a", "node-1");
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(GetString(**b, "spec.nodeName") == "node-1");
  BOOST_TEST(GetString((**b)["status"]["conditions"][0], "type") == "PodScheduled");
  BOOST_TEST(GetString((**b)["status"]["conditions"][0], "status") == "True");
  BOOST_TEST((store.BindPod("default", "a", "node-2").status().code() == Status::Code::kConflict));
}

BOOST_AUTO_TEST_CASE(graceful_pod_delete_marks_then_reaper_removes) {
  // The reaper plays the kubelet of an existing node; a pod on a missing one waits.
  BOOST_REQUIRE(store.Create("nodes", "", Json(R"({"metadata":{"name":"node-1"}})")).ok());
  store.Create("pods", "default", PodJson("a", "", "node-1"));
  store.Create("pods", "default", PodJson("lost", "", "node-9"));
  BOOST_REQUIRE(store.Delete("pods", "default", "lost", {}).ok());
  DeleteOptions opts;
  opts.grace_period_seconds = 10;
  auto d = store.Delete("pods", "default", "a", opts);
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(!d->removed);
  BOOST_TEST(GetString(*d->object, "metadata.deletionTimestamp") == "2027-01-15T08:00:10Z");
  store.ReapExpired();
  BOOST_TEST(store.Get("pods", "default", "a").ok());
  clock.Advance(std::chrono::seconds(30));
  store.ReapExpired();
  BOOST_TEST((store.Get("pods", "default", "a").status().code() == Status::Code::kNotFound));
  BOOST_TEST(store.Get("pods", "default", "lost").ok());
}

BOOST_AUTO_TEST_CASE(a_terminating_pod_is_reaped_after_later_writes_and_a_removed_one_is_not) {
  BOOST_REQUIRE(store.Create("nodes", "", Json(R"({"metadata":{"name":"node-1"}})")).ok());
  store.Create("pods", "default", PodJson("a", "", "node-1"));
  store.Create("pods", "default", PodJson("b", "", "node-1"));
  DeleteOptions grace;
  grace.grace_period_seconds = 10;
  BOOST_REQUIRE(store.Delete("pods", "default", "a", grace).ok());
  BOOST_REQUIRE(store.Delete("pods", "default", "b", grace).ok());
  // A status write while terminating keeps the pod among those the reaper watches.
  auto written = store.Mutate("pods", "default", "a", [](rapidjson::Document& pod) {
    SetMember(pod, "status.phase", rapidjson::Value("Running"));
    return Status::Ok();
  });
  BOOST_REQUIRE(written.ok());
  DeleteOptions now;
  now.grace_period_seconds = 0;
  BOOST_REQUIRE(store.Delete("pods", "default", "b", now).ok());  // gone before its grace ends
  // A null deletionTimestamp is no deletion: the reaper leaves that pod alone.
  store.Create("pods", "default", PodJson("c", "", "node-1"));
  BOOST_REQUIRE(store
                    .Mutate("pods", "default", "c",
                            [](rapidjson::Document& pod) {
                              SetMember(pod, "metadata.deletionTimestamp",
                                        rapidjson::Value(rapidjson::kNullType));
                              return Status::Ok();
                            })
                    .ok());
  clock.Advance(std::chrono::seconds(30));
  store.ReapExpired();
  BOOST_TEST((store.Get("pods", "default", "a").status().code() == Status::Code::kNotFound));
  BOOST_TEST(store.List("pods", "").items.size() == 1u);
  BOOST_TEST(store.Get("pods", "default", "c").ok());
}

BOOST_AUTO_TEST_CASE(the_garbage_collectors_index_follows_owner_references_and_deletion) {
  const char* owned = R"(,"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",)"
                      R"("name":"rs","uid":"u1"}])";
  store.Create("pods", "default", PodJson("plain"));
  store.Create("pods", "default", PodJson("dependent", owned));
  store.Create("configmaps", "default", Json(R"({"metadata":{"name":"c","finalizers":["x/y"]}})"));
  BOOST_REQUIRE(store.Delete("configmaps", "default", "c", {}).ok());  // held: being deleted
  ListPage relevant;
  relevant.owned_or_deleting = true;
  auto names = [&](const char* resource) {
    std::vector<std::string> out;
    for (const ObjectPtr& o : store.List(resource, "", {}, relevant).items)
      out.push_back(GetString(*o, "metadata.name"));
    return out;
  };
  BOOST_TEST(names("pods") == std::vector<std::string>{"dependent"});
  BOOST_TEST(names("configmaps") == std::vector<std::string>{"c"});
  BOOST_REQUIRE(store
                    .Mutate("pods", "default", "dependent",
                            [](rapidjson::Document& pod) {
                              pod["metadata"].RemoveMember("ownerReferences");  // orphaned
                              return Status::Ok();
                            })
                    .ok());
  BOOST_TEST(names("pods").empty());
  RemoveFinalizer(store, "configmaps", "default", "c", "x/y");
  BOOST_TEST(!store.Get("configmaps", "default", "c").ok());
  BOOST_TEST(names("configmaps").empty());
}

BOOST_AUTO_TEST_CASE(stored_objects_and_their_history_hold_only_what_they_need) {
  // A parsed document's allocator starts with a 64 KiB chunk; the store keeps a copy
  // in chunks sized to the object, the version a watch replays after a delete too.
  rapidjson::Document parsed = PodJson("a");
  BOOST_TEST(parsed.GetAllocator().Capacity() >= 64u * 1024);
  auto created = store.Create("pods", "default", std::move(parsed));
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(AllocatorCapacity(*created) <= 8u * 1024);
  BOOST_TEST(GetString(**created, "metadata.name") == "a");
  auto watcher = store.Watch("pods", "", store.CurrentResourceVersion());
  BOOST_REQUIRE(watcher.ok());
  BOOST_REQUIRE(store.Delete("pods", "default", "a", {}).ok());
  auto deleted = (*watcher)->Next(std::chrono::milliseconds(0));
  BOOST_REQUIRE(deleted.ok() && deleted->has_value());
  BOOST_TEST(((*deleted)->type == ChangeType::kDeleted));
  BOOST_TEST(AllocatorCapacity((*deleted)->object) <= 8u * 1024);
}

BOOST_AUTO_TEST_CASE(a_list_filters_one_snapshot_while_writes_go_on) {
  store.Create("pods", "default", PodJson("a"));
  store.Create("pods", "default", PodJson("b"));
  std::future<Result<ObjectPtr>> write;
  bool written_meanwhile = false;
  auto listed = store.List("pods", "", [&](const rapidjson::Value&) {
    if (!write.valid()) {
      // Another client's create, while this list is being filtered: it must not wait
      // for the list to end (before, it waited for the lock the filter ran under).
      write = std::async(std::launch::async,
                         [&] { return store.Create("pods", "default", PodJson("c")); });
      written_meanwhile = write.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    }
    return true;
  });
  BOOST_TEST(written_meanwhile);
  BOOST_REQUIRE(write.get().ok());
  // The list is the snapshot it started from: a and b, at their resourceVersion.
  BOOST_REQUIRE(listed.items.size() == 2u);
  BOOST_TEST(GetString(*listed.items[1], "metadata.name") == "b");
  BOOST_TEST(listed.resource_version < store.CurrentResourceVersion());
  BOOST_TEST(store.List("pods", "").items.size() == 3u);
}

BOOST_AUTO_TEST_CASE(kubelet_managed_pods_wait_for_finalize) {
  store.RegisterKubelet("node-1");
  auto created = store.Create("pods", "default", PodJson("a", "", "node-1"));
  auto d = store.Delete("pods", "default", "a", {});
  BOOST_TEST(!d->removed);
  clock.Advance(std::chrono::seconds(60));
  store.ReapExpired();
  BOOST_TEST(store.Get("pods", "default", "a").ok());
  BOOST_TEST(
      (store.FinalizePodDeletion("default", "a", "other-uid").code() == Status::Code::kConflict));
  BOOST_TEST(store.FinalizePodDeletion("default", "a", GetString(**created, "metadata.uid")).ok());
  BOOST_TEST(!store.Get("pods", "default", "a").ok());
}

BOOST_AUTO_TEST_CASE(unbound_or_zero_grace_deletes_at_once_and_preconditions_hold) {
  store.Create("pods", "default", PodJson("unbound"));
  BOOST_TEST(store.Delete("pods", "default", "unbound", {})->removed);
  store.Create("pods", "default", PodJson("bound", "", "node-1"));
  DeleteOptions bad_uid;
  bad_uid.precondition_uid = "nope";
  BOOST_TEST((store.Delete("pods", "default", "bound", bad_uid).status().code() ==
              Status::Code::kConflict));
  DeleteOptions now;
  now.grace_period_seconds = 0;
  BOOST_TEST(store.Delete("pods", "default", "bound", now)->removed);
  BOOST_TEST(
      (store.Delete("pods", "default", "bound", now).status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(watch_resumes_exactly_and_expires_outside_the_window) {
  uint64_t rv0 = store.CurrentResourceVersion();
  store.Create("pods", "default", PodJson("a"));
  store.Create("configmaps", "default", Json(R"({"metadata":{"name":"c"}})"));
  store.Delete("pods", "default", "a", {});
  auto w = store.Watch("pods", "default", rv0);
  BOOST_REQUIRE(w.ok());
  auto e1 = (*w)->Next(std::chrono::milliseconds(0));
  BOOST_REQUIRE(e1.ok() && e1->has_value());
  BOOST_TEST(((*e1)->type == ChangeType::kAdded));
  BOOST_TEST((*e1)->resource_version == rv0 + 1);
  auto e2 = (*w)->Next(std::chrono::milliseconds(0));
  BOOST_TEST(((*e2)->type == ChangeType::kDeleted));  // the configmap is filtered out
  BOOST_TEST((*e2)->resource_version == rv0 + 3);
  BOOST_TEST(GetString(*(*e2)->object, "metadata.resourceVersion") == std::to_string(rv0 + 3));
  auto none = (*w)->Next(std::chrono::milliseconds(10));
  BOOST_TEST(!none->has_value());
  // Push the history past its window of 50 changes.
  for (int i = 0; i < 60; ++i) {
    store.Create("configmaps", "default", Json(R"({"metadata":{"generateName":"g-"}})"));
  }
  BOOST_TEST((store.Watch("pods", "", rv0).status().code() == Status::Code::kExpired));
  BOOST_TEST(((*w)->Next(std::chrono::milliseconds(0)).status().code() == Status::Code::kExpired));
  store.CompactHistory();
  uint64_t now = store.CurrentResourceVersion();
  BOOST_TEST((store.Watch("pods", "", now - 1).status().code() == Status::Code::kExpired));
  BOOST_TEST(store.Watch("pods", "", now).ok());
}

BOOST_AUTO_TEST_CASE(watcher_wakes_on_a_write_from_another_thread) {
  auto w = store.Watch("pods", "", 0);
  std::thread writer([&] { store.Create("pods", "default", PodJson("late")); });
  auto e = (*w)->Next(std::chrono::seconds(30));
  writer.join();
  BOOST_REQUIRE(e.ok() && e->has_value());
  BOOST_TEST((*e)->name == "late");
}

BOOST_AUTO_TEST_CASE(shutdown_releases_blocked_watchers) {
  auto w = store.Watch("", "", 0);
  std::thread stopper([&] { store.Shutdown(); });
  auto e = (*w)->Next(std::chrono::seconds(30));
  stopper.join();
  BOOST_TEST(!e->has_value());
}

BOOST_AUTO_TEST_CASE(namespace_delete_removes_its_objects) {
  CreateNamespace(store, "team");
  store.Create("pods", "team", PodJson("a"));
  BOOST_TEST(store.Delete("namespaces", "", "team", {}).ok());
  BOOST_TEST(!store.Get("pods", "team", "a").ok());
  BOOST_TEST(store.List("pods", "").items.empty());
}

BOOST_AUTO_TEST_CASE(set_condition_keeps_transition_time_when_status_is_unchanged) {
  rapidjson::Document node = Json(R"({"metadata":{"name":"n"}})");
  SetCondition(node, "Ready", "True", "KubeletReady", "", "t1");
  SetCondition(node, "Ready", "True", "KubeletReady", "", "t2");
  BOOST_TEST(GetString(node["status"]["conditions"][0], "lastTransitionTime") == "t1");
  SetCondition(node, "Ready", "False", "NodeStatusUnknown", "", "t3");
  BOOST_TEST(node["status"]["conditions"].Size() == 1u);
  BOOST_TEST(GetString(node["status"]["conditions"][0], "lastTransitionTime") == "t3");
}

BOOST_AUTO_TEST_SUITE_END()
