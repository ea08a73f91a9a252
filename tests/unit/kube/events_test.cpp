#include <boost/test/unit_test.hpp>

#include <thread>

#include "fake_transport.h"
#include "k8sbridge/kube/events.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;
using testing::Env;
using testing::StatusJson;
using FT = FakeTransport;

ObjectReference NodeRef() {
  return {"v1", "Node", "", "gpu-1", "uid-gpu-1"};
}

EventRecorderOptions Manual() {
  EventRecorderOptions o;
  o.reporting_controller = "k8sbridge.io/reconciler";
  o.reporting_instance = "ctl-0";
  o.start_thread = false;
  return o;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(events)

BOOST_AUTO_TEST_CASE(creates_events_k8s_io_v1_event) {
  Env env;
  env.transport->SetFallback([](const FT::Recorded& r) { return FT::Json(201, r.body); });
  EventRecorder rec(*env.client, Manual());
  rec.Record(NodeRef(), "Warning", "NodeDrained", "Drain", std::string(3000, 'x'));
  BOOST_TEST(rec.ProcessPending() == 1u);
  auto r = env.requests().at(0);
  BOOST_TEST(r.method == "POST");
  BOOST_TEST(r.url == "https://k8s.test:6443/apis/events.k8s.io/v1/namespaces/default/events");
  auto ev = *Object::Parse(r.body);
  BOOST_TEST(ev.String("/reportingController") == "k8sbridge.io/reconciler");
  BOOST_TEST(ev.String("/reportingInstance") == "ctl-0");
  BOOST_TEST(ev.String("/type") == "Warning");
  BOOST_TEST(ev.String("/reason") == "NodeDrained");
  BOOST_TEST(ev.String("/action") == "Drain");
  BOOST_TEST(ev.String("/note").size() == 1024u);
  BOOST_TEST(ev.String("/regarding/name") == "gpu-1");
  BOOST_TEST(ev.String("/eventTime") == "2027-01-15T08:00:00.000000Z");  // MicroTime
}

BOOST_AUTO_TEST_CASE(repeats_fold_into_a_series) {
  Env env;
  env.transport->SetFallback(
      [](const FT::Recorded& r) { return FT::Json(200, r.method == "POST" ? r.body : "{}"); });
  EventRecorder rec(*env.client, Manual());
  for (int i = 0; i < 3; ++i) {
    rec.Record(NodeRef(), "Normal", "Resumed", "Resume", "node resumed");
    rec.ProcessPending();
    env.clock.Advance(10s);
  }
  rec.Record(NodeRef(), "Normal", "Resumed", "Resume", "something else");
  rec.ProcessPending();
  auto r = env.requests();
  BOOST_REQUIRE(r.size() == 4u);
  BOOST_TEST(r[0].method == "POST");
  std::string name = Object::Parse(r[0].body)->Name();
  BOOST_TEST(r[1].method == "PATCH");
  BOOST_TEST(r[1].url.find("/events/" + name) != std::string::npos);
  BOOST_TEST(r[1].body ==
             R"({"series":{"count":2,"lastObservedTime":"2027-01-15T08:00:10.000000Z"}})");
  BOOST_TEST(r[2].body ==
             R"({"series":{"count":3,"lastObservedTime":"2027-01-15T08:00:20.000000Z"}})");
  BOOST_TEST(r[3].method == "POST");  // a different note is a different event
  // After the series window a repeat starts a new event.
  env.clock.Advance(7min);
  rec.Record(NodeRef(), "Normal", "Resumed", "Resume", "node resumed");
  rec.ProcessPending();
  BOOST_TEST(env.requests().at(4).method == "POST");
}

BOOST_AUTO_TEST_CASE(series_whose_event_vanished_starts_again) {
  Env env;
  env.transport->Push(FT::Json(201, "{}"));
  env.transport->Push(FT::Json(404, StatusJson(404, "NotFound", "gone")));
  env.transport->Push(FT::Json(201, "{}"));
  EventRecorder rec(*env.client, Manual());
  rec.Record(NodeRef(), "Normal", "R", "A", "n");
  rec.Record(NodeRef(), "Normal", "R", "A", "n");
  BOOST_TEST(rec.ProcessPending() == 2u);
  auto r = env.requests();
  BOOST_TEST(r.size() == 3u);
  BOOST_TEST(r[2].method == "POST");
  BOOST_TEST(rec.failed() == 0u);
}

BOOST_AUTO_TEST_CASE(never_blocks_and_drops_when_full) {
  Env env;
  // The server hangs: the sending thread is stuck, callers are not.
  std::mutex gate;
  gate.lock();
  env.transport->SetFallback([&](const FT::Recorded&) {
    std::lock_guard l(gate);
    return FT::Json(201, "{}");
  });
  EventRecorderOptions o;
  o.queue_capacity = 5;
  {
    EventRecorder rec(*env.client, o);
    for (int i = 0; i < 100; ++i)
      rec.Record(NodeRef(), "Normal", "R", "A", std::to_string(i));
    BOOST_TEST(rec.dropped() >= 94u);
    gate.unlock();
    rec.Flush(10s);
    BOOST_TEST(rec.failed() == 0u);
    BOOST_TEST(env.requests().size() == 100u - rec.dropped());
  }
}

BOOST_AUTO_TEST_CASE(failures_are_counted_not_raised) {
  Env env;
  env.transport->Push(FT::Json(403, StatusJson(403, "Forbidden", "events is forbidden")));
  EventRecorder rec(*env.client, Manual());
  rec.Record(NodeRef(), "Normal", "R", "A", "n");
  rec.ProcessPending();
  BOOST_TEST(rec.failed() == 1u);
}

// A real apiserver 422s an event about a Node outside default/kube-system: a
// daemon working in namespace "slurm" still files node events in "default", and
// events about its pods next to the pods.
BOOST_AUTO_TEST_CASE(node_events_go_to_default_pod_events_to_the_pods_namespace) {
  Env env;
  env.transport->SetFallback([](const FT::Recorded& r) { return FT::Json(201, r.body); });
  EventRecorder rec(*env.client, Manual());
  rec.Record(NodeRef(), "Warning", "HardwareDrain", "Drain", "xid 79");
  rec.Record({"v1", "Pod", "slurm", "w-0", "uid-w-0"}, "Warning", "SlurmNodeDrained", "Drain", "x");
  BOOST_TEST(rec.ProcessPending() == 2u);
  auto r = env.requests();
  BOOST_TEST(r.at(0).url ==
             "https://k8s.test:6443/apis/events.k8s.io/v1/namespaces/default/events");
  BOOST_TEST(Object::Parse(r.at(0).body)->Namespace() == "default");
  BOOST_TEST(r.at(1).url == "https://k8s.test:6443/apis/events.k8s.io/v1/namespaces/slurm/events");
}

// The note is cut at 1 kB between two UTF-8 characters: a cut inside one leaves
// invalid UTF-8, which the server turns into U+FFFD, and then the note is too long.
BOOST_AUTO_TEST_CASE(note_is_cut_between_utf8_characters) {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  std::string note = std::string(1022, 'x') + euro + "tail";
  std::string cut = EventNote(note);
  BOOST_TEST(cut == std::string(1022, 'x'));  // the euro sign does not fit whole
  BOOST_TEST(EventNote(std::string(1021, 'x') + euro + "y") == std::string(1021, 'x') + euro);
  // Invalid bytes become U+FFFD, as the server would make them, and count as 3.
  BOOST_TEST(EventNote("a\xFF"
                       "b") ==
             "a\xEF\xBF\xBD"
             "b");
  BOOST_TEST(EventNote("cut \xE2\x82") == "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  BOOST_TEST(EventNote(std::string(1023, 'x') + "\xFF").size() == 1023u);
  BOOST_TEST(EventNote("\xC3\xA9t\xC3\xA9") == "\xC3\xA9t\xC3\xA9");  // été, untouched

  Env env;
  env.transport->SetFallback([](const FT::Recorded& r) { return FT::Json(201, r.body); });
  EventRecorder rec(*env.client, Manual());
  rec.Record(NodeRef(), "Warning", "HardwareDrain", "Drain", note);
  rec.ProcessPending();
  BOOST_TEST(Object::Parse(env.requests().at(0).body)->String("/note") == cut);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
