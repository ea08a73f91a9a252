#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "fake_transport.h"
#include "k8sbridge/kube/warnings.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;
using testing::Env;
using testing::PodJson;
using testing::StatusJson;
using FT = FakeTransport;
}  // namespace

BOOST_AUTO_TEST_SUITE(client)

BOOST_AUTO_TEST_CASE(get_sends_token_and_returns_object) {
  Env env;
  env.transport->Push(FT::Json(200, PodJson("p1", "5")));
  auto pod = Pods(*env.client, "default").Get("p1");
  BOOST_REQUIRE(pod.ok());
  BOOST_TEST(pod->ResourceVersion() == "5");
  auto reqs = env.requests();
  BOOST_TEST(reqs.at(0).url == "https://k8s.test:6443/api/v1/namespaces/default/pods/p1");
  BOOST_TEST(reqs.at(0).Header("Authorization") == "Bearer t0");
  BOOST_TEST(reqs.at(0).timeout.count() == 30000);
  BOOST_TEST(reqs.at(0).connect_timeout.count() == 10000);
  BOOST_TEST(env.metrics.Requests("GET", 200) == 1);
}

BOOST_AUTO_TEST_CASE(errors_carry_code_reason_message_details) {
  Env env;
  env.transport->Push(FT::Json(404, StatusJson(404, "NotFound", "pods \\\"p9\\\" not found")));
  auto pod = env.client->Get(kPods, "default", "p9");
  BOOST_REQUIRE(!pod.ok());
  const Status& s = pod.status();
  BOOST_TEST(s.code() == Status::Code::kNotFound);
  BOOST_REQUIRE(s.api_error());
  BOOST_TEST(s.api_error()->http_code == 404);
  BOOST_TEST(s.api_error()->reason == "NotFound");
  BOOST_TEST(s.api_error()->message == "pods \"p9\" not found");
  BOOST_TEST(s.api_error()->details.find("\"kind\":\"pods\"") != std::string::npos);
  BOOST_TEST(s.message().find("GET /api/v1/namespaces/default/pods/p9: HTTP 404 NotFound") !=
             std::string::npos);
  BOOST_TEST(env.metrics.Requests("GET", 404) == 1);
}

BOOST_AUTO_TEST_CASE(list_follows_continue_pages) {
  Env env;
  env.transport->Push(FT::Json(
      200, R"({"kind":"PodList","metadata":{"resourceVersion":"10","continue":"c1"},"items":[)" +
               PodJson("a", "1") + "]}"));
  env.transport->Push(
      FT::Json(200, R"({"kind":"PodList","metadata":{"resourceVersion":"10"},"items":[)" +
                        PodJson("b", "2") + "," + PodJson("c", "3") + "]}"));
  ListOptions lo;
  lo.page_size = 1;
  lo.label_selector = "app=slurm,tier in (a,b)";
  lo.field_selector = "spec.nodeName=n1";
  auto list = env.client->List(kPods, "default", lo);
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->items.size() == 3u);
  BOOST_TEST(list->resource_version == "10");
  auto reqs = env.requests();
  BOOST_TEST(reqs.at(0).url ==
             "https://k8s.test:6443/api/v1/namespaces/default/"
             "pods?labelSelector=app%3Dslurm%2Ctier%20in%20%28a%2Cb%29"
             "&fieldSelector=spec.nodeName%3Dn1&limit=1");
  BOOST_TEST(reqs.at(1).url.find("&continue=c1") != std::string::npos);
  BOOST_TEST(env.metrics.Requests("LIST", 200) == 2);
}

BOOST_AUTO_TEST_CASE(list_restarts_once_when_continue_expires) {
  Env env;
  env.transport->Push(
      FT::Json(200, R"({"metadata":{"resourceVersion":"10","continue":"c1"},"items":[)" +
                        PodJson("a", "1") + "]}"));
  env.transport->Push(FT::Json(410, StatusJson(410, "Expired", "continue token expired")));
  env.transport->Push(FT::Json(200, R"({"metadata":{"resourceVersion":"20"},"items":[)" +
                                        PodJson("a", "1") + "," + PodJson("b", "2") + "]}"));
  auto list = env.client->List(kPods, "default");
  BOOST_REQUIRE(list.ok());
  BOOST_TEST(list->items.size() == 2u);
  BOOST_TEST(list->resource_version == "20");
  // items null (some servers) is an empty list, not an error
  env.transport->Push(FT::Json(200, R"({"metadata":{"resourceVersion":"1"},"items":null})"));
  BOOST_TEST(env.client->List(kNodes, "")->items.empty());
}

BOOST_AUTO_TEST_CASE(create_replace_patch_delete_wire_format) {
  Env env;
  for (int i = 0; i < 8; ++i)
    env.transport->Push(FT::Json(200, PodJson("p", std::to_string(i))));
  auto pod = *Object::Parse(PodJson("p", "3"));
  BOOST_TEST(env.client->Create(kPods, "default", pod).ok());
  BOOST_TEST(env.client->Replace(kPods, "default", pod).ok());
  BOOST_TEST(env.client->Patch(kPods, "default", "p", PatchType::kMerge, "{}").ok());
  BOOST_TEST(env.client->Patch(kPods, "default", "p", PatchType::kJson, "[]").ok());
  BOOST_TEST(env.client->Patch(kPods, "default", "p", PatchType::kStrategicMerge, "{}").ok());
  PatchOptions apply;
  apply.field_manager = "k8sbridge-sync";
  apply.force = true;
  BOOST_TEST(env.client->Patch(kPods, "default", "p", PatchType::kApply, "kind: Pod", apply).ok());
  DeleteOptions del;
  del.grace_period_seconds = 0;
  del.propagation_policy = "Background";
  del.precondition_uid = "uid-p";
  del.precondition_resource_version = "3";
  BOOST_TEST(env.client->Delete(kPods, "default", "p", del).ok());
  BOOST_TEST(SetNodeUnschedulable(*env.client, "n1", true).ok());
  auto r = env.requests();
  BOOST_TEST(r[0].method == "POST");
  BOOST_TEST(r[0].url == "https://k8s.test:6443/api/v1/namespaces/default/pods");
  BOOST_TEST(r[0].body.find(R"("name":"p")") != std::string::npos);
  BOOST_TEST(r[1].method == "PUT");
  BOOST_TEST(r[1].url.ends_with("/pods/p"));
  BOOST_TEST(r[1].body.find(R"("resourceVersion":"3")") != std::string::npos);
  BOOST_TEST(r[2].Header("Content-Type") == "application/merge-patch+json");
  BOOST_TEST(r[3].Header("Content-Type") == "application/json-patch+json");
  BOOST_TEST(r[4].Header("Content-Type") == "application/strategic-merge-patch+json");
  BOOST_TEST(r[5].Header("Content-Type") == "application/apply-patch+yaml");
  BOOST_TEST(r[5].url.ends_with("/pods/p?fieldManager=k8sbridge-sync&force=true"));
  BOOST_TEST(r[6].method == "DELETE");
  BOOST_TEST(
      r[6].body ==
      R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,"propagationPolicy":"Background",)"
      R"("preconditions":{"uid":"uid-p","resourceVersion":"3"}})");
  BOOST_TEST(r[7].url == "https://k8s.test:6443/api/v1/nodes/n1?fieldManager=k8sbridge");
  BOOST_TEST(r[7].body == R"({"spec":{"unschedulable":true}})");
  // Server-side apply without a field manager is refused before sending.
  PatchOptions none;
  none.field_manager = "";
  BOOST_TEST(
      env.client->Patch(kPods, "default", "p", PatchType::kApply, "x", none).status().code() ==
      Status::Code::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(delete_answering_a_status_gives_an_empty_object) {
  Env env;
  env.transport->Push(FT::Json(200, R"({"kind":"Status","status":"Success"})"));
  auto r = env.client->Delete(kConfigMaps, "default", "cm");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->Name() == "");
  env.transport->Push(
      FT::Json(409, StatusJson(409, "Conflict", "Precondition failed: UID in precondition")));
  BOOST_TEST(env.client->Delete(kPods, "default", "p").status().code() == Status::Code::kConflict);
}

// A caller that needs only the verdict (k8sbridge-power's creates) gets an empty
// Object: the answer is not decoded, so even one that is not JSON is a success,
// while an error answer is still decoded into its Status.
BOOST_AUTO_TEST_CASE(an_answer_not_wanted_is_not_decoded) {
  Env env;
  CallOptions verdict_only;
  verdict_only.decode_answer = false;
  auto pod = *Object::Parse(PodJson("p", ""));
  env.transport->Push(FT::Json(201, "not JSON: never read"));
  auto created = env.client->Create(kPods, "default", pod, verdict_only);
  BOOST_REQUIRE(created.ok());
  BOOST_TEST(created->Name().empty());
  env.transport->Push(FT::Json(201, "not JSON: never read"));
  BOOST_TEST(!env.client->Create(kPods, "default", pod).ok());  // decoded by default
  env.transport->Push(FT::Json(409, StatusJson(409, "AlreadyExists", "pods \\\"p\\\" exists")));
  auto exists = env.client->Create(kPods, "default", pod, verdict_only);
  BOOST_TEST(HttpCode(exists.status()) == 409);
  BOOST_REQUIRE(exists.status().api_error());
  BOOST_TEST(exists.status().api_error()->reason == "AlreadyExists");
  BOOST_TEST(env.requests().size() == 3u);
}

BOOST_AUTO_TEST_CASE(retry_after_is_honoured_for_429_and_5xx) {
  Env env;
  env.transport->Push(
      FT::Json(429, StatusJson(429, "TooManyRequests", "slow down"), {{"Retry-After", "3"}}));
  env.transport->Push(
      FT::Json(503, StatusJson(503, "ServiceUnavailable", "busy"), {{"Retry-After", "2"}}));
  env.transport->Push(FT::Json(201, PodJson("p", "1")));
  auto r = env.client->Create(kPods, "default", *Object::Parse(PodJson("p", "")));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(env.requests().size() == 3u);  // writes too: the server said it did nothing
  BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(env.clock.total_slept()).count() ==
             5);
  BOOST_TEST(env.metrics.Requests("POST", 429) == 1);
  BOOST_TEST(env.metrics.Requests("POST", 503) == 1);
  BOOST_TEST(env.logger.Contains("retrying after 3 s (Retry-After)"));
}

BOOST_AUTO_TEST_CASE(retry_after_is_capped_and_retries_are_bounded) {
  ClientOptions o;
  o.max_retries = 2;
  o.max_retry_after = 10s;
  Env env(o);
  for (int i = 0; i < 3; ++i) {
    env.transport->Push(
        FT::Json(429, StatusJson(429, "TooManyRequests", "x"), {{"Retry-After", "3600"}}));
  }
  auto r = env.client->Get(kPods, "default", "p");
  BOOST_TEST(r.status().code() == Status::Code::kUnavailable);
  BOOST_REQUIRE(r.status().api_error());
  BOOST_TEST(r.status().api_error()->retry_after.value().count() == 3600);
  BOOST_TEST(env.requests().size() == 3u);
  BOOST_TEST((env.clock.total_slept() == 20s));
}

BOOST_AUTO_TEST_CASE(five_hundred_without_retry_after_is_surfaced) {
  Env env;
  env.transport->Push(FT::Json(500, StatusJson(500, "InternalError", "etcd is sad")));
  auto r = env.client->Get(kPods, "default", "p");
  BOOST_TEST(r.status().code() == Status::Code::kUnavailable);
  BOOST_TEST(r.status().api_error()->reason == "InternalError");
  BOOST_TEST(env.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(connection_errors_retry_reads_only) {
  Env env;
  env.transport->Push(FT::Error(Status::Unavailable("connection reset")));
  env.transport->Push(FT::Error(Status::Unavailable("connection reset")));
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  BOOST_TEST((env.clock.total_slept() == 2400ms));  // 0.8 s then 1.6 s
  env.transport->Push(FT::Error(Status::Unavailable("connection reset")));
  auto w = env.client->Create(kPods, "default", *Object::Parse(PodJson("p", "")));
  BOOST_TEST(w.status().code() == Status::Code::kUnavailable);
  BOOST_TEST(HttpCode(w.status()) == 0);
  BOOST_TEST(env.requests().size() == 4u);
  BOOST_TEST(env.metrics.Requests("POST", 0) == 1);
}

// A read that waits to retry after connection errors stops waiting soon after
// another client on the same server (the lease's) gets an answer: the outage is over.
BOOST_AUTO_TEST_CASE(a_read_retried_after_connection_errors_retries_once_another_is_answered) {
  Env env;
  Client lease(env.config, env.transport, env.client->options());
  for (int i = 0; i < 5; ++i)  // waits 0.8, 1.6, 3.2, 6.4 and 12.8 s
    env.transport->Push(FT::Error(Status::Unavailable("connection refused")));
  env.transport->Push(FT::Json(200, R"({"kind":"Lease","metadata":{}})"));
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  bool renewed = false;
  env.clock.SetOnSleep([&](std::chrono::nanoseconds slept) {
    if (!renewed && slept >= 15s) {  // 2.8 s into the 12.8 s wait
      renewed = true;
      BOOST_TEST(lease.Get(kLeases, "k8sbridge", "sync").ok());
    }
  });
  BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  BOOST_TEST(renewed);
  BOOST_TEST((env.clock.total_slept() == 15200ms));  // then a 200 ms pause, not 9.8 s more
}

// Options copied from a client share its ServerContact; other clients do not.
BOOST_AUTO_TEST_CASE(clients_made_from_the_same_options_share_their_server_contact) {
  Env env;
  Client lease(env.config, env.transport, env.client->options());
  Env other;
  BOOST_TEST(lease.options().contact == env.client->options().contact);
  BOOST_TEST(other.client->options().contact != env.client->options().contact);
  BOOST_TEST(ServerContact::Serves(404));
  BOOST_TEST(ServerContact::Serves(401));
  BOOST_TEST(!ServerContact::Serves(429));
  BOOST_TEST(!ServerContact::Serves(503));
}

BOOST_AUTO_TEST_CASE(unauthorized_rereads_token_file_and_retries_once) {
  std::string path = "/tmp/kube-client-token-" + std::to_string(getpid());
  std::ofstream(path) << "old";
  Config cfg;
  cfg.token_file = path;
  Env env({}, cfg);
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  std::ofstream(path) << "new";  // rotated on disk, server already refuses the old one
  env.transport->Push(FT::Json(401, StatusJson(401, "Unauthorized", "Unauthorized")));
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  auto r = env.requests();
  BOOST_TEST(r.at(1).Header("Authorization") == "Bearer old");
  BOOST_TEST(r.at(2).Header("Authorization") == "Bearer new");
  // A second 401 in a row is surfaced.
  env.transport->Push(FT::Json(401, StatusJson(401, "Unauthorized", "Unauthorized")));
  env.transport->Push(FT::Json(401, StatusJson(401, "Unauthorized", "Unauthorized")));
  BOOST_TEST(env.client->Get(kPods, "default", "p").status().code() ==
             Status::Code::kUnauthenticated);
  std::filesystem::remove(path);
}

// Over HTTP/2 the API server follows a 401 with GOAWAY and RST_STREAM, which libcurl
// may report as a failed transfer (CURLE_PARTIAL_FILE) although the 401's head
// arrived. The server did not act on the request, so even a create is sent again,
// once, with the token file read anew.
BOOST_AUTO_TEST_CASE(unauthorized_answer_cut_short_rereads_token_file_and_retries_a_write) {
  std::string path = "/tmp/kube-client-token-cut-" + std::to_string(getpid());
  std::ofstream(path) << "old";
  Config cfg;
  cfg.token_file = path;
  Env env({}, cfg);
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  std::ofstream(path) << "new";
  env.transport->Push(FT::CutShort(401, R"({"kind":"Sta)",
                                   Status::Unavailable("POST: Transferred a partial file")));
  env.transport->Push(FT::Json(201, PodJson("q", "2")));
  auto created = Pods(*env.client, "default").Create(*Object::Parse(PodJson("q", "")));
  BOOST_TEST(created.ok(), created.status().ToString());
  auto r = env.requests();
  BOOST_REQUIRE(r.size() == 3u);
  BOOST_TEST(r.at(1).Header("Authorization") == "Bearer old");
  BOOST_TEST(r.at(2).method == "POST");
  BOOST_TEST(r.at(2).Header("Authorization") == "Bearer new");
  BOOST_TEST(env.metrics.Requests("POST", 401) == 1);
  BOOST_TEST(env.metrics.Requests("POST", 201) == 1);
  // Twice in a row: surfaced as the 401 it is, not as a lost connection.
  env.transport->Push(FT::CutShort(401, "", Status::Unavailable("cut")));
  env.transport->Push(FT::CutShort(401, "", Status::Unavailable("cut")));
  auto refused = Pods(*env.client, "default").Create(*Object::Parse(PodJson("s", "")));
  BOOST_TEST(refused.status().code() == Status::Code::kUnauthenticated);
  BOOST_TEST(env.requests().size() == 5u);
  std::filesystem::remove(path);
}

// Any other answer cut short leaves it unknown whether the server acted: a write is
// not sent again.
BOOST_AUTO_TEST_CASE(write_cut_short_after_another_answer_is_not_sent_again) {
  for (int status : {201, 409, 500, 503}) {
    Env env;
    env.transport->Push(FT::CutShort(status, "{", Status::Unavailable("reset")));
    auto created = Pods(*env.client, "default").Create(*Object::Parse(PodJson("q", "")));
    BOOST_TEST(created.status().code() == Status::Code::kUnavailable, status);
    BOOST_TEST(env.requests().size() == 1u, status);
  }
}

BOOST_AUTO_TEST_CASE(update_resolves_conflict_by_reading_again) {
  Env env;
  env.transport->Push(FT::Json(200, PodJson("p", "1")));
  env.transport->Push(FT::Json(409, StatusJson(409, "Conflict", "the object has been modified")));
  env.transport->Push(FT::Json(200, PodJson("p", "2")));
  env.transport->Push(FT::Json(200, PodJson("p", "3")));
  int calls = 0;
  auto r = env.client->Update(kPods, "default", "p", [&](Object& o) {
    ++calls;
    o.SetString("/metadata/labels/k8sbridge", "yes");
    return Status::Ok();
  });
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(calls == 2);
  auto reqs = env.requests();
  BOOST_TEST(reqs.at(3).body.find(R"("resourceVersion":"2")") != std::string::npos);
  BOOST_TEST(reqs.at(3).body.find(R"("k8sbridge":"yes")") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(token_bucket_limits_rate) {
  ClientOptions o;
  o.qps = 2;
  o.burst = 3;
  Env env(o);
  env.transport->SetFallback([](const FT::Recorded&) { return FT::Json(200, PodJson("p", "1")); });
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  BOOST_TEST((env.clock.total_slept().count() == 0));  // the burst
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  BOOST_TEST((env.clock.total_slept() == 2s));  // then 2 per second
}

BOOST_AUTO_TEST_CASE(cancellation_stops_retries) {
  Env env;
  CancelToken cancel;
  CallOptions call{&cancel, std::nullopt};
  // The token is cancelled while the answer comes back: the Retry-After sleep
  // notices it and no further request goes out.
  FT::Answer busy = FT::Json(429, "{}", {{"Retry-After", "5"}});
  busy.before = [&] { cancel.Cancel(); };
  env.transport->Push(busy);
  auto r = env.client->Get(kPods, "default", "p", call);
  BOOST_TEST(r.status().code() == Status::Code::kCancelled);
  BOOST_TEST(env.requests().size() == 1u);
  BOOST_TEST((env.clock.total_slept() < 1s));
  // Already cancelled: nothing is sent.
  BOOST_TEST(env.client->Get(kPods, "default", "p", call).status().code() ==
             Status::Code::kCancelled);
  BOOST_TEST(env.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(bounded_concurrency_never_exceeds_limit) {
  std::atomic<int> running{0}, peak{0};
  auto results = ForEachBounded(50, 4, [&](size_t i) {
    int now = ++running;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(1ms);
    --running;
    return i == 7 ? Status::Internal("seven") : Status::Ok();
  });
  BOOST_TEST(results.size() == 50u);
  BOOST_TEST(peak.load() <= 4);
  BOOST_TEST(!results[7].ok());
  BOOST_TEST(results[8].ok());
}

BOOST_AUTO_TEST_CASE(client_is_safe_from_many_threads) {
  ClientOptions o;
  o.qps = 1000;
  o.burst = 1000;
  Env env(o);
  env.transport->SetFallback([](const FT::Recorded&) { return FT::Json(200, PodJson("p", "1")); });
  auto results = ForEachBounded(
      200, 8, [&](size_t) { return env.client->Get(kPods, "default", "p").status(); });
  for (const auto& s : results)
    BOOST_TEST(s.ok());
  BOOST_TEST(env.metrics.Requests("GET", 200) == 200);
}

// Warning headers (unknown fields dropped under fieldValidation=Warn, deprecated
// APIs): logged, each distinct text once per client, in bounded memory.
BOOST_AUTO_TEST_CASE(warning_headers_parse_rfc7234) {
  BOOST_TEST(ParseWarningHeader(R"(299 - "unknown field \"spec.foo\"")") ==
             std::vector<std::string>{R"(unknown field "spec.foo")"});
  BOOST_TEST(ParseWarningHeader(R"(299 - "a, b", 299 k8s "c" "Sat, 01 Jan 2000 00:00:00 GMT")") ==
             (std::vector<std::string>{"a, b", "c"}));
  BOOST_TEST(ParseWarningHeader(R"(199 - "not a 299", junk, 299 - "kept")") ==
             std::vector<std::string>{"kept"});
  BOOST_TEST(ParseWarningHeader("299 - unquoted").empty());
}

// Warning lines that end with `suffix`.
size_t WarningsEnding(const RecordingLogger& logger, std::string_view suffix) {
  size_t n = 0;
  for (const auto& line : logger.lines())
    n += line.level == LogLevel::kWarning && line.message.ends_with(suffix);
  return n;
}

BOOST_AUTO_TEST_CASE(warnings_are_logged_once_per_text) {
  Env env;
  auto warned = [](std::string value) {
    return FakeTransport::Json(200, "{}", {{"Warning", std::move(value)}});
  };
  env.transport->Push(warned(R"(299 - "unknown field \"spec.foo\"")"));
  env.transport->Push(warned(R"(299 - "unknown field \"spec.foo\"")"));
  env.transport->Push(warned(R"(299 - "unknown field \"spec.bar\"")"));
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(env.client->Get(kPods, "default", "p").ok());
  BOOST_TEST(WarningsEnding(env.logger, R"(the server warns: unknown field "spec.foo")") == 1u);
  BOOST_TEST(WarningsEnding(env.logger, R"(the server warns: unknown field "spec.bar")") == 1u);

  // Memory stays bounded: the oldest texts are forgotten (and may be logged again).
  RecordingLogger logger;
  WarningLog log(logger);
  for (size_t i = 0; i < WarningLog::kMaxRemembered + 1; ++i)
    log.Note(R"(299 - "w)" + std::to_string(i) + R"(")", "GET", "/x");
  log.Note(R"(299 - "w0")", "GET", "/x");  // forgotten: logged again
  log.Note(R"(299 - "w5")", "GET", "/x");  // remembered: not logged again
  BOOST_TEST(WarningsEnding(logger, "the server warns: w0") == 2u);
  BOOST_TEST(WarningsEnding(logger, "the server warns: w5") == 1u);
  log.Note("299 - \"" + std::string(10000, 'x') + "\"", "GET", "/x");
  BOOST_TEST(WarningsEnding(logger, "warns: " + std::string(WarningLog::kMaxText, 'x')) == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
