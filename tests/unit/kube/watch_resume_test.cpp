// A watch that breaks in the middle of its stream (an HTTP/2 reset or GOAWAY when
// an apiserver restarts) must resume from the last resourceVersion it saw, the
// way client-go's reflector does: never replay the stream from its start.
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <thread>

#include "fake_transport.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/text.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;
using testing::Env;
using testing::PodJson;
using testing::WatchLine;
using FT = FakeTransport;

struct HistoryEvent {
  std::string type, name;
  int64_t rv;
};

// A server with a history: a watch from resourceVersion R gets every event after
// R. The first `broken` watches break after `events_before_break` events.
struct HistoryServer {
  std::vector<HistoryEvent> history;
  int broken = 1;
  size_t events_before_break = 3;

  static int64_t RvOf(const std::string& url) {
    auto at = url.find("resourceVersion=");
    if (at == std::string::npos)
      return 0;
    auto end = url.find('&', at);
    auto rv = text::ParseInt<int64_t>(url.substr(at + 16, end - at - 16), 0);
    return rv.ok() ? *rv : 0;
  }
  FT::Answer Answer(const FT::Recorded& request) {
    if (request.url.find("watch=1") == std::string::npos) {
      return FT::Json(200, R"({"kind":"PodList","metadata":{"resourceVersion":"10"},"items":[)" +
                               PodJson("a", "9") + "]}");
    }
    std::vector<std::string> chunks;
    for (const auto& e : history) {
      if (e.rv > RvOf(request.url))
        chunks.push_back(WatchLine(e.type, PodJson(e.name, std::to_string(e.rv))));
    }
    if (chunks.empty()) {
      // Nothing new: a quiet stream that only bookmarks (and does not spin the test).
      FT::Answer quiet =
          FT::Stream({WatchLine("BOOKMARK", R"({"kind":"Pod","metadata":{"resourceVersion":")" +
                                                std::to_string(RvOf(request.url)) + R"("}})")});
      quiet.before = [] { std::this_thread::sleep_for(1ms); };
      return quiet;
    }
    if (broken > 0 && chunks.size() > events_before_break) {
      --broken;
      chunks.resize(events_before_break);
      return FT::BrokenStream(chunks, Status::Unavailable("HTTP/2 stream was reset"));
    }
    return FT::Stream(chunks);
  }
};

// Checks, event by event, that no object goes back in resourceVersion and that a
// deleted object is not brought back by an event older than its deletion.
struct MonotonicSink final : ReflectorSink {
  std::map<std::string, int64_t> rv;
  std::map<std::string, int64_t> deleted_at;
  std::vector<std::string> violations;
  std::vector<std::string> log;

  static int64_t Rv(const Object& o) {
    auto rv = text::ParseInt<int64_t>(o.ResourceVersion(), 0);
    return rv.ok() ? *rv : 0;
  }
  void Replace(std::vector<Object> items, const std::string&) override {
    for (const auto& o : items)
      rv[o.Name()] = Rv(o);
  }
  void Apply(const WatchEvent& e) override {
    const std::string name = e.object.Name();
    const int64_t at = Rv(e.object);
    log.push_back(std::string(EventTypeName(e.type)) + " " + name + " @" + std::to_string(at));
    auto known = rv.find(name);
    if (known != rv.end() && at <= known->second)
      violations.push_back(name + " went back from " + std::to_string(known->second) + " to " +
                           std::to_string(at));
    auto gone = deleted_at.find(name);
    if (gone != deleted_at.end() && at <= gone->second)
      violations.push_back(name + " deleted at " + std::to_string(gone->second) + " came back at " +
                           std::to_string(at));
    if (e.type == EventType::kDeleted) {
      rv.erase(name);
      deleted_at[name] = at;
    } else {
      rv[name] = at;
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(watch_resume)

BOOST_AUTO_TEST_CASE(broken_stream_resumes_from_last_seen_resource_version) {
  Env env;
  HistoryServer server;
  server.history = {{"MODIFIED", "a", 11},
                    {"ADDED", "b", 12},
                    {"DELETED", "b", 13},
                    {"MODIFIED", "a", 14},
                    {"ADDED", "c", 15}};
  CancelToken cancel;
  env.transport->SetFallback([&](const FT::Recorded& r) {
    if (env.transport->requests().size() >= 4)  // list, broken watch, resumed watch
      cancel.Cancel();
    return server.Answer(r);
  });
  MonotonicSink sink;
  Reflector reflector(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
  reflector.Run(cancel);

  BOOST_TEST(sink.violations == std::vector<std::string>{});
  BOOST_TEST(sink.log == (std::vector<std::string>{"MODIFIED a @11", "ADDED b @12", "DELETED b @13",
                                                   "MODIFIED a @14", "ADDED c @15"}));
  auto requests = env.requests();
  BOOST_REQUIRE(requests.size() >= 3u);
  // The watch after the break starts where the broken one left off.
  BOOST_TEST(requests[1].url.find("resourceVersion=10&") != std::string::npos);
  BOOST_TEST(requests[2].url.find("watch=1&resourceVersion=13&") != std::string::npos);
  BOOST_TEST(env.metrics.Requests("LIST", 200) == 1);  // resumed, not relisted
}

// The same through an Informer: its cache never holds an object older than one
// it already had, and a deleted object stays deleted.
BOOST_AUTO_TEST_CASE(informer_cache_never_goes_back_after_a_broken_stream) {
  Env env;
  HistoryServer server;
  server.history = {
      {"ADDED", "b", 11}, {"MODIFIED", "a", 12}, {"DELETED", "b", 13}, {"MODIFIED", "a", 14}};
  server.events_before_break = 3;
  std::atomic<bool> done{false};
  env.transport->SetFallback([&](const FT::Recorded& r) {
    if (env.transport->requests().size() >= 4)
      done = true;
    return server.Answer(r);
  });
  Informer informer(*env.client, kPods, ReflectorOptions{}, &env.metrics);
  std::mutex mu;
  std::vector<std::string> seen;
  informer.AddHandlers({[&](const Object& o) {
                          std::lock_guard l(mu);
                          seen.push_back("add " + o.Name() + "@" + o.ResourceVersion());
                        },
                        [&](const Object&, const Object& n) {
                          std::lock_guard l(mu);
                          seen.push_back("update " + n.Name() + "@" + n.ResourceVersion());
                        },
                        [&](const Object& o) {
                          std::lock_guard l(mu);
                          seen.push_back("delete " + o.Name());
                        }});
  informer.Start();
  for (int i = 0; i < 2000 && !done; ++i)
    std::this_thread::sleep_for(5ms);
  informer.Stop();
  BOOST_REQUIRE(done.load());
  BOOST_TEST(!informer.Get("default/b").has_value());
  BOOST_TEST(informer.Get("default/a")->ResourceVersion() == "14");
  std::lock_guard l(mu);
  BOOST_TEST(seen == (std::vector<std::string>{"add a@9", "add b@11", "update a@12", "delete b",
                                               "update a@14"}));
}

// Upstream's cacher answers a watch from a version it has not reached with 504,
// cause ResourceVersionTooLarge and Retry-After: 1. Asking again for that version
// waits on the same lagging cache; client-go relists with resourceVersion "".
BOOST_AUTO_TEST_CASE(too_large_resource_version_relists_from_scratch) {
  Env env;
  CancelToken cancel;
  env.transport->SetOnExhausted([&] { cancel.Cancel(); });
  const std::string too_large =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Too large resource )"
      R"(version: 20, current: 10","reason":"Timeout","details":{"causes":[{"reason":)"
      R"("ResourceVersionTooLarge","message":"Too large resource version"}],)"
      R"("retryAfterSeconds":1},"code":504})";
  env.transport->Push(FT::Json(200, R"({"kind":"PodList","metadata":{"resourceVersion":"20"},)"
                                    R"("items":[]})"));
  env.transport->Push(FT::Json(504, too_large, {{"Retry-After", "1"}}));
  env.transport->Push(FT::Json(200, R"({"kind":"PodList","metadata":{"resourceVersion":"21"},)"
                                    R"("items":[]})"));
  env.transport->Push(FT::Stream({WatchLine("ADDED", PodJson("a", "22"))}));
  MonotonicSink sink;
  Reflector reflector(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
  reflector.Run(cancel);
  auto requests = env.requests();
  BOOST_REQUIRE(requests.size() >= 4u);
  BOOST_TEST(requests[2].url == "https://k8s.test:6443/api/v1/pods?limit=500");  // RV ""
  BOOST_TEST(requests[3].url.find("watch=1&resourceVersion=21&") != std::string::npos);
  BOOST_TEST(env.metrics.WatchRestarts("too-large") == 1);
  BOOST_TEST(sink.log == std::vector<std::string>{"ADDED a @22"});
}

// After a watch failure the cache reads unhealthy; the next watch's 200 makes it
// healthy at once, before any event: a real server may send its first bookmark
// only a minute later, and sync skips its passes while the cache is unhealthy.
BOOST_AUTO_TEST_CASE(watch_answer_200_is_healthy_before_any_event) {
  struct HealthSink final : ReflectorSink {
    std::vector<std::string> log;
    void Replace(std::vector<Object>, const std::string&) override { log.push_back("list"); }
    void Apply(const WatchEvent& e) override { log.push_back(std::string(EventTypeName(e.type))); }
    void Healthy(bool ok) override { log.push_back(ok ? "healthy" : "unhealthy"); }
  };
  Env env;
  HealthSink sink;
  CancelToken cancel;
  env.transport->SetOnExhausted([&] { cancel.Cancel(); });
  env.transport->Push(FT::Json(200, R"({"kind":"PodList","metadata":{"resourceVersion":"10"},)"
                                    R"("items":[]})"));
  env.transport->Push(FT::Json(500, testing::StatusJson(500, "InternalError", "boom")));
  FT::Answer quiet = FT::Stream({});  // 200, then nothing until the server's timeout
  quiet.before = [&] { env.clock.Advance(300s); };
  env.transport->Push(std::move(quiet));
  Reflector reflector(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
  reflector.Run(cancel);
  BOOST_TEST(sink.log == (std::vector<std::string>{"list", "healthy", "unhealthy", "healthy"}));
}

// Back-off waits are jittered (client-go's reflector: factor 1.0) so that daemons
// that lost the server together do not come back in lockstep; the random source is
// the client's, fixed here.
BOOST_AUTO_TEST_CASE(reflector_back_off_is_jittered) {
  ClientOptions options;
  options.random = [] { return 0.5; };
  Env env(options);
  CancelToken cancel;
  env.transport->SetOnExhausted([&] { cancel.Cancel(); });
  env.transport->Push(FT::Json(500, testing::StatusJson(500, "InternalError", "boom")));
  env.transport->Push(FT::Json(500, testing::StatusJson(500, "InternalError", "boom")));
  MonotonicSink sink;
  Reflector reflector(*env.client, kPods, ReflectorOptions{}, sink, &env.metrics);
  reflector.Run(cancel);
  // 0.8 s * 1.5, then 1.6 s * 1.5; the third list finds no answer and stops the run.
  BOOST_TEST((env.clock.total_slept() == 1200ms + 2400ms));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
