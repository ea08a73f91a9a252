#include <boost/test/unit_test.hpp>

#include "fake_transport.h"
#include "k8sbridge/kube/informer.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;
using testing::Env;
using testing::PodJson;
using testing::StatusJson;
using testing::WatchLine;
using FT = FakeTransport;

std::string ListJson(const std::string& rv, std::vector<std::string> items) {
  std::string out = R"({"kind":"PodList","metadata":{"resourceVersion":")" + rv + R"("},"items":[)";
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? "," : "") + items[i];
  return out + "]}";
}

std::string Bookmark(const std::string& rv) {
  return WatchLine("BOOKMARK", R"({"kind":"Pod","metadata":{"resourceVersion":")" + rv + R"("}})");
}

// Records what the reflector delivered.
struct Sink final : ReflectorSink {
  std::vector<std::string> log;
  void Replace(std::vector<Object> items, const std::string& rv) override {
    log.push_back("REPLACE " + std::to_string(items.size()) + " @" + rv);
  }
  void Apply(const WatchEvent& e) override {
    log.push_back(std::string(EventTypeName(e.type)) + " " + e.object.Name() + " @" +
                  e.object.ResourceVersion());
  }
};

// Runs a reflector over the scripted answers until they run out.
struct ReflectorRun {
  Env env;
  Sink sink;
  CancelToken cancel;
  ReflectorRun() {
    env.transport->SetOnExhausted([this] { cancel.Cancel(); });
  }
  void Run() {
    Reflector r(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
    r.Run(cancel);
  }
  std::vector<std::string> urls() {
    std::vector<std::string> out;
    for (const auto& r : env.requests())
      out.push_back(r.url.substr(r.url.find("/api")));
    return out;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(watch)

BOOST_AUTO_TEST_CASE(decoder_splits_lines_across_reads) {
  std::string stream = WatchLine("ADDED", PodJson("a", "1")) +
                       WatchLine("MODIFIED", PodJson("a", "2")) + Bookmark("3");
  // Every way of cutting the stream in two gives the same three events.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    WatchDecoder d;
    std::vector<std::string> got;
    auto on = [&](WatchEvent&& e) {
      got.push_back(std::string(EventTypeName(e.type)) + e.object.ResourceVersion());
      return true;
    };
    BOOST_REQUIRE(d.Feed(std::string_view(stream).substr(0, cut), on).ok());
    BOOST_REQUIRE(d.Feed(std::string_view(stream).substr(cut), on).ok());
    BOOST_REQUIRE(d.Finish(on).ok());
    BOOST_TEST(got == (std::vector<std::string>{"ADDED1", "MODIFIED2", "BOOKMARK3"}));
  }
}

BOOST_AUTO_TEST_CASE(decoder_rejects_garbage) {
  WatchDecoder d;
  auto on = [](WatchEvent&&) { return true; };
  BOOST_TEST(!d.Feed("not json\n", on).ok());
  BOOST_TEST(!WatchDecoder::ParseLine(R"({"type":"ADDED"})").ok());
  BOOST_TEST(!WatchDecoder::ParseLine(R"({"type":"EXPLODED","object":{}})").ok());
  WatchDecoder cut;
  BOOST_TEST(cut.Feed(R"({"type":"ADDED","obj)", on).ok());
  BOOST_TEST(cut.Finish(on).code() == Status::Code::kUnavailable);
}

BOOST_AUTO_TEST_CASE(watch_resumes_from_last_rv_with_bookmarks) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {PodJson("a", "9")})));
  t.env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("b", "11")), Bookmark("15")}));
  t.env.transport->Push(FT::Stream({WatchLine("DELETED", PodJson("a", "16"))}));
  t.Run();
  auto u = t.urls();
  BOOST_TEST(u.at(0) == "/api/v1/pods?limit=500");
  BOOST_TEST(u.at(1) ==
             "/api/v1/pods?watch=1&resourceVersion=10&allowWatchBookmarks=true&timeoutSeconds=300");
  BOOST_TEST(u.at(2).find("resourceVersion=15&") != std::string::npos);  // from the bookmark
  BOOST_TEST(u.at(3).find("resourceVersion=16&") != std::string::npos);
  BOOST_TEST(t.sink.log ==
             (std::vector<std::string>{"REPLACE 1 @10", "ADDED b @11", "DELETED a @16"}));
  BOOST_TEST((t.env.clock.total_slept().count() == 0));  // streams that made progress: no back-off
  BOOST_TEST((t.env.transport->requests().at(1).timeout == 330s));  // timeoutSeconds + slack
}

BOOST_AUTO_TEST_CASE(gone_as_http_status_relists) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  t.env.transport->Push(
      FT::Json(410, StatusJson(410, "Expired", "too old resource version: 10 (20)")));
  t.env.transport->Push(FT::Json(200, ListJson("20", {PodJson("a", "19")})));
  t.env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("b", "21"))}));
  t.Run();
  auto u = t.urls();
  BOOST_TEST(u.at(2) == "/api/v1/pods?limit=500");
  BOOST_TEST(u.at(3).find("resourceVersion=20&") != std::string::npos);
  BOOST_TEST(t.sink.log ==
             (std::vector<std::string>{"REPLACE 0 @10", "REPLACE 1 @20", "ADDED b @21"}));
  BOOST_TEST(t.env.metrics.WatchRestarts("expired") == 1);
  BOOST_TEST((t.env.clock.total_slept() == 800ms));
}

// An API server restart: the watch fails while it is down (the back-off grows),
// then the new server's watch cache answers 410. The relist comes after the first
// back-off step, not the grown one (the chaos suite's api-restart: orphans were
// kept 50 s after the API came back).
BOOST_AUTO_TEST_CASE(gone_after_an_outage_relists_without_the_grown_back_off) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  for (int i = 0; i < 4; ++i)
    t.env.transport->Push(FT::Json(503, StatusJson(503, "ServiceUnavailable", "down")));
  t.env.transport->Push(
      FT::Json(410, StatusJson(410, "Expired", "too old resource version: 10 (20)")));
  t.env.transport->Push(FT::Json(200, ListJson("20", {PodJson("a", "19")})));
  t.env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("b", "21"))}));
  t.Run();
  BOOST_TEST(t.sink.log ==
             (std::vector<std::string>{"REPLACE 0 @10", "REPLACE 1 @20", "ADDED b @21"}));
  // 0.8 + 1.6 + 3.2 + 6.4 for the 503s, then 0.8 (not 12.8) before the relist.
  BOOST_TEST(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.env.clock.total_slept()).count() ==
      12800);
}

// A 410 with no outage before it keeps doubling: a server that expires every watch
// at once must not be relisted in a tight loop.
BOOST_AUTO_TEST_CASE(gone_again_and_again_backs_off_more_each_time) {
  ReflectorRun t;
  for (int i = 0; i < 3; ++i) {
    t.env.transport->Push(FT::Json(200, ListJson("10", {})));
    t.env.transport->Push(FT::Json(410, StatusJson(410, "Expired", "too old resource version")));
  }
  t.Run();
  BOOST_TEST(t.env.metrics.WatchRestarts("expired") == 3);
  BOOST_TEST((t.env.clock.total_slept() == 800ms + 1600ms + 3200ms));
}

BOOST_AUTO_TEST_CASE(gone_mid_stream_relists) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  t.env.transport->Push(
      FT::Stream({WatchLine("ADDED", PodJson("a", "11")),
                  WatchLine("ERROR", StatusJson(410, "Expired", "too old resource version")),
                  WatchLine("ADDED", PodJson("never", "99"))}));
  t.env.transport->Push(FT::Json(200, ListJson("30", {PodJson("a", "11")})));
  t.Run();
  BOOST_TEST(t.sink.log ==
             (std::vector<std::string>{"REPLACE 0 @10", "ADDED a @11", "REPLACE 1 @30"}));
  BOOST_TEST(t.urls().at(2) == "/api/v1/pods?limit=500");
  BOOST_TEST(t.env.metrics.WatchRestarts("expired") == 1);
}

BOOST_AUTO_TEST_CASE(empty_instantly_closed_stream_relists_with_backoff) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  for (int i = 0; i < 8; ++i) {
    t.env.transport->Push(FT::Stream({}));  // closes at once, nothing in it
    t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  }
  t.Run();
  BOOST_TEST(t.env.metrics.WatchRestarts("empty-stream") == 8);
  // 0.8 + 1.6 + 3.2 + 6.4 + 12.8 + 25.6 + 30 + 30 (capped)
  BOOST_TEST(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.env.clock.total_slept()).count() ==
      110400);
  BOOST_TEST(t.env.metrics.Requests("LIST", 200) == 9);
}

// A quiet watch (nodes: no event for minutes) that the server took and kept open
// is progress although it carried nothing: each cut starts the back-off afresh,
// where it would otherwise have grown from faults long past (the chaos long run:
// 46 s of a stale node cache after an api-restart that followed a watch-reset).
BOOST_AUTO_TEST_CASE(a_quiet_stream_kept_open_resets_the_back_off) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  for (int i = 0; i < 4; ++i) {
    FT::Answer quiet = FT::BrokenStream({}, Status::Unavailable("stream reset"));
    quiet.before = [&] { t.env.clock.Advance(5s); };  // open for 5 s, then cut
    t.env.transport->Push(std::move(quiet));
  }
  t.Run();
  BOOST_TEST(t.env.metrics.WatchRestarts("error") == 4);
  BOOST_TEST((t.env.clock.total_slept() == 4 * 800ms));
}

BOOST_AUTO_TEST_CASE(errors_back_off_and_resume_without_relist) {
  ReflectorRun t;
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  t.env.transport->Push(FT::Error(Status::Unavailable("connection refused")));
  t.env.transport->Push(FT::Json(500, StatusJson(500, "InternalError", "boom")));
  t.env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("a", "11"))}));
  t.env.transport->Push(FT::Error(Status::Unavailable("connection refused")));
  t.Run();
  auto u = t.urls();
  // Connection errors on a watch are retried by the client (a read) with 0.8 s, then
  // the 500 ends the watch: the reflector backs off 0.8 s and watches from RV 10 again.
  BOOST_TEST(u.size() == 6u);
  for (size_t i = 1; i < 4; ++i)
    BOOST_TEST(u[i].find("watch=1&resourceVersion=10&") != std::string::npos);
  BOOST_TEST(u[4].find("resourceVersion=11&") != std::string::npos);
  BOOST_TEST(t.env.metrics.WatchRestarts("error") == 1);
  BOOST_TEST(t.env.metrics.Requests("LIST", 200) == 1);
}

// Readers (the sync daemon) must tell a live cache from one whose list or watch fails.
BOOST_AUTO_TEST_CASE(health_follows_lists_and_watch_errors) {
  struct HealthSink final : ReflectorSink {
    std::vector<bool> health;
    void Replace(std::vector<Object>, const std::string&) override {}
    void Apply(const WatchEvent&) override {}
    void Healthy(bool ok) override { health.push_back(ok); }
  };
  Env env;
  HealthSink sink;
  CancelToken cancel;
  env.transport->SetOnExhausted([&] { cancel.Cancel(); });
  env.transport->Push(FT::Json(500, StatusJson(500, "InternalError", "boom")));  // list
  env.transport->Push(FT::Json(200, ListJson("10", {})));
  env.transport->Push(FT::Json(500, StatusJson(500, "InternalError", "boom")));  // watch
  env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("a", "11"))}));
  Reflector r(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
  r.Run(cancel);
  // The last watch's 200 makes it healthy before its event does.
  BOOST_TEST(sink.health == (std::vector<bool>{false, true, false, true, true}));

  Informer informer(*env.client, kPods);
  BOOST_TEST(!informer.IsHealthy());  // not synced yet
  informer.Replace({}, "1");
  BOOST_TEST(informer.IsHealthy());
  informer.Healthy(false);
  BOOST_TEST(!informer.IsHealthy());
}

// Runs a reflector whose first watch fails with `failure` and whose back-off
// starts at 30 s, while another client on the same server (the lease's) gets an
// answer 5 s into that back-off. Returns how long the reflector slept.
std::chrono::milliseconds SleptWhenAnotherRequestIsAnswered(FT::Answer failure) {
  ReflectorRun t;
  Client lease(t.env.config, t.env.transport, t.env.client->options());
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  t.env.transport->Push(std::move(failure));                                  // the watch
  t.env.transport->Push(FT::Json(200, R"({"kind":"Lease","metadata":{}})"));  // the renewal
  t.env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("a", "11"))}));
  bool renewed = false;
  t.env.clock.SetOnSleep([&](std::chrono::nanoseconds slept) {
    if (!renewed && slept >= 5s) {
      renewed = true;
      BOOST_TEST(lease.Get(kLeases, "k8sbridge", "sync").ok());
    }
  });
  ReflectorOptions options;
  options.initial_backoff = 30s;
  Reflector r(*t.env.client, kPods, options, t.sink, &t.env.metrics);
  r.Run(t.cancel);
  BOOST_TEST(renewed);
  BOOST_TEST(t.sink.log == (std::vector<std::string>{"REPLACE 0 @10", "ADDED a @11"}));
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.env.clock.total_slept());
}

// After an outage the back-off has grown to 30 s; a lease renewal that gets
// through shows the server is back, and the cache must not stay stale for the rest
// of the back-off (the chaos long run: orphans kept 50 s after a 60 s outage).
BOOST_AUTO_TEST_CASE(an_answer_to_another_request_ends_an_outage_back_off) {
  // 5 s into the back-off, then the 200 ms pause (the tests' jitter is 0).
  BOOST_TEST(SleptWhenAnotherRequestIsAnswered(
                 FT::Json(503, StatusJson(503, "ServiceUnavailable", "down"))) == 5200ms);
  BOOST_TEST(SleptWhenAnotherRequestIsAnswered(
                 FT::Json(500, StatusJson(500, "InternalError", "etcd"))) == 5200ms);
}

// Only a failure that means the server did not answer is cut short: a 429 asks us
// to wait, and a 403 (RBAC) does not go away because other requests succeed.
BOOST_AUTO_TEST_CASE(a_back_off_after_an_answer_is_not_cut_short) {
  BOOST_TEST(SleptWhenAnotherRequestIsAnswered(
                 FT::Json(429, StatusJson(429, "TooManyRequests", "slow down"))) == 30000ms);
  BOOST_TEST(SleptWhenAnotherRequestIsAnswered(
                 FT::Json(403, StatusJson(403, "Forbidden", "no watch"))) == 30000ms);
}

// A server that answers the lease but keeps failing the watch: the shortcut is
// taken three times, then the back-off is whole again.
BOOST_AUTO_TEST_CASE(a_stream_that_keeps_failing_gets_its_whole_back_off_again) {
  ReflectorRun t;
  Client lease(t.env.config, t.env.transport, t.env.client->options());
  t.env.transport->Push(FT::Json(200, ListJson("10", {})));
  for (int i = 0; i < 4; ++i) {
    t.env.transport->Push(FT::Json(503, StatusJson(503, "ServiceUnavailable", "down")));
    t.env.transport->Push(FT::Json(200, R"({"kind":"Lease","metadata":{}})"));
  }
  int renewals = 0;
  t.env.clock.SetOnSleep([&](std::chrono::nanoseconds slept) {
    if (renewals < 4 && slept >= std::chrono::seconds(renewals + 1)) {  // each second
      ++renewals;
      BOOST_TEST(lease.Get(kLeases, "k8sbridge", "sync").ok());
    }
  });
  ReflectorOptions options;
  options.initial_backoff = 10s;
  Reflector r(*t.env.client, kPods, options, t.sink, &t.env.metrics);
  r.Run(t.cancel);
  BOOST_TEST(renewals == 4);
  // The first three back-offs (10, 20 and 30 s) end 200 ms after the renewals at
  // 1, 2 and 3 s; the fourth (30 s) is whole although the lease renewed at 4 s.
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(t.env.clock.total_slept()) ==
             3200ms + 30s);
}

BOOST_AUTO_TEST_CASE(informer_cache_and_handlers) {
  Env env;
  CancelToken stop;
  env.transport->Push(FT::Json(200, ListJson("10", {PodJson("a", "1"), PodJson("b", "2")})));
  env.transport->Push(FT::Stream({WatchLine("MODIFIED", PodJson("a", "11")),
                                  WatchLine("DELETED", PodJson("b", "12")),
                                  WatchLine("ADDED", PodJson("c", "13"))}));
  env.transport->Push(FT::Json(410, StatusJson(410, "Expired", "gone")));
  // After the relist, "a" changed and "c" vanished while we were not watching.
  env.transport->Push(FT::Json(200, ListJson("20", {PodJson("a", "19"), PodJson("d", "18")})));
  Informer informer(*env.client, kPods, ReflectorOptions{}, &env.metrics);
  std::vector<std::string> seen;
  std::mutex mu;
  informer.AddHandlers({[&](const Object& o) {
                          std::lock_guard l(mu);
                          seen.push_back("add " + o.Name());
                        },
                        [&](const Object& o, const Object& n) {
                          std::lock_guard l(mu);
                          seen.push_back("update " + o.Name() + " " + o.ResourceVersion() + "->" +
                                         n.ResourceVersion());
                        },
                        [&](const Object& o) {
                          std::lock_guard l(mu);
                          seen.push_back("delete " + o.Name());
                        }});
  std::atomic<bool> done{false};
  env.transport->SetOnExhausted([&] { done = true; });
  BOOST_TEST(!informer.HasSynced());
  BOOST_TEST(informer.List().empty());  // never blocks, even before the first list
  informer.Start();
  BOOST_TEST(informer.WaitForSync(10s));
  for (int i = 0; i < 1000 && !done; ++i)
    std::this_thread::sleep_for(5ms);
  informer.Stop();
  BOOST_REQUIRE(done.load());
  BOOST_TEST(informer.size() == 2u);
  BOOST_TEST(informer.Get("default/a")->ResourceVersion() == "19");
  BOOST_TEST(informer.Get("default/d").has_value());
  BOOST_TEST(!informer.Get("default/c").has_value());
  std::lock_guard l(mu);
  BOOST_TEST(seen == (std::vector<std::string>{"add a", "add b", "update a 1->11", "delete b",
                                               "add c", "update a 11->19", "add d", "delete c"}));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
