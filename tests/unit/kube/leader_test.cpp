#include <boost/test/unit_test.hpp>

#include "fake_transport.h"
#include "k8sbridge/kube/leader.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;
using testing::Env;
using testing::StatusJson;
using FT = FakeTransport;

// A tiny in-memory Lease server with resourceVersion checks.
struct LeaseServer {
  std::mutex mu;
  std::optional<Object> lease;
  int rv = 0;
  FT::Answer Handle(const FT::Recorded& r) {
    std::lock_guard l(mu);
    if (r.method == "GET") {
      if (!lease)
        return FT::Json(404, StatusJson(404, "NotFound", "leases not found"));
      return FT::Json(200, lease->ToJson());
    }
    auto obj = *Object::Parse(r.body);
    if (r.method == "POST") {
      if (lease)
        return FT::Json(409, StatusJson(409, "AlreadyExists", "exists"));
    } else if (!lease || obj.ResourceVersion() != lease->ResourceVersion()) {
      return FT::Json(409, StatusJson(409, "Conflict", "the object has been modified"));
    }
    obj.SetString("/metadata/resourceVersion", std::to_string(++rv));
    lease = obj;
    return FT::Json(200, obj.ToJson());
  }
  void Install(FakeTransport& t) {
    t.SetFallback([this](const FT::Recorded& r) { return Handle(r); });
  }
};

LeaderElectionOptions Opts(const std::string& id) {
  LeaderElectionOptions o;
  o.namespace_ = "slurm";
  o.name = "k8sbridge-reconciler";
  o.identity = id;
  return o;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(leader)

BOOST_AUTO_TEST_CASE(acquire_renew_and_takeover_by_local_clock) {
  LeaseServer server;
  Env a_env, b_env;  // two candidates, two independent clocks
  server.Install(*a_env.transport);
  server.Install(*b_env.transport);
  LeaderElector a(*a_env.client, Opts("a")), b(*b_env.client, Opts("b"));
  BOOST_TEST(a.TryAcquireOrRenew());
  BOOST_TEST(lease::HolderIdentity(*server.lease) == "a");
  BOOST_TEST(server.lease->String("/spec/renewTime") == "2027-01-15T08:00:00.000000Z");
  BOOST_TEST(!b.TryAcquireOrRenew());
  BOOST_TEST(b.ObservedLeader() == "a");
  // b's clock is far ahead of a's: b still waits a full lease duration from when
  // it first saw the record, never trusting a's renewTime.
  b_env.clock.Advance(14s);
  BOOST_TEST(!b.TryAcquireOrRenew());
  a_env.clock.Advance(2s);
  BOOST_TEST(a.TryAcquireOrRenew());  // renewal changes the record...
  b_env.clock.Advance(2s);
  BOOST_TEST(!b.TryAcquireOrRenew());  // ...so b restarts its wait
  b_env.clock.Advance(15s);
  BOOST_TEST(b.TryAcquireOrRenew());  // a stopped renewing: b takes over
  BOOST_TEST(lease::HolderIdentity(*server.lease) == "b");
  BOOST_TEST(lease::Transitions(*server.lease) == 1);
  BOOST_TEST(!a.TryAcquireOrRenew());
  BOOST_TEST(!a.IsLeader());
}

BOOST_AUTO_TEST_CASE(conflicting_write_loses) {
  LeaseServer server;
  Env env;
  server.Install(*env.transport);
  LeaderElector a(*env.client, Opts("a"));
  BOOST_TEST(a.TryAcquireOrRenew());
  // Someone else writes between our read and our write.
  FT::Answer stale = FT::Json(200, server.lease->ToJson());
  stale.before = [&] {
    std::lock_guard l(server.mu);
    server.lease->SetString("/metadata/resourceVersion", "999");
  };
  env.transport->Push(stale);
  BOOST_TEST(!a.TryAcquireOrRenew());
  BOOST_TEST(!a.IsLeader());
}

BOOST_AUTO_TEST_CASE(run_leads_until_renewals_fail_for_renew_deadline) {
  LeaseServer server;
  Env env;
  server.Install(*env.transport);
  auto o = Opts("a");
  int started = 0, stopped = 0;
  o.on_started_leading = [&] { ++started; };
  o.on_stopped_leading = [&] { ++stopped; };
  int renewals = 0;
  env.transport->SetFallback([&](const FT::Recorded& r) {
    if (r.method == "PUT" && ++renewals > 3)
      return FT::Json(500, StatusJson(500, "InternalError", "etcd down"));
    return server.Handle(r);
  });
  LeaderElector a(*env.client, o);
  CancelToken cancel;
  a.Run(cancel);
  BOOST_TEST(started == 1);
  BOOST_TEST(stopped == 1);
  BOOST_TEST(!a.IsLeader());
  // 3 good renewals every 2 s, then failures until 10 s (renew deadline) passed.
  BOOST_TEST((env.clock.total_slept() == 6s + 10s));
}

BOOST_AUTO_TEST_CASE(cancel_releases_the_lease) {
  LeaseServer server;
  Env env;
  server.Install(*env.transport);
  CancelToken cancel;
  auto o = Opts("a");
  o.on_started_leading = [&] { cancel.Cancel(); };
  LeaderElector b(*env.client, o);
  b.Run(cancel);
  BOOST_TEST(lease::HolderIdentity(*server.lease) == "");
}

// The API server stalls (every call hangs until the client gives up): the leader
// must stop acting within the renew deadline of its last successful renewal, as
// client-go's renew loop does, not after its client's 30 s timeouts and retries.
BOOST_AUTO_TEST_CASE(stalled_api_stops_leading_within_renew_deadline) {
  LeaseServer server;
  Env env;
  auto o = Opts("a");  // lease 15 s, renew deadline 10 s, retry period 2 s
  int stopped = 0;
  o.on_stopped_leading = [&] { ++stopped; };
  std::unique_ptr<LeaderElector> elector;
  int writes = 0;
  Clock::Steady::time_point attempt_start{}, renewed{};
  std::vector<std::string> violations;
  env.transport->SetFallback([&](const FT::Recorded& r) {
    if (writes < 3) {  // acquire, then two renewals
      if (r.method == "GET")
        attempt_start = env.clock.Now();
      auto answer = server.Handle(r);
      if (r.method != "GET") {
        ++writes;
        renewed = attempt_start;
      }
      return answer;
    }
    // Stalled: the call hangs for as long as the client lets it.
    if (env.clock.Now() + r.timeout > renewed + o.renew_deadline)
      violations.push_back("a call runs past the renew deadline");
    if (r.timeout > o.renew_deadline / 2)
      violations.push_back("an attempt longer than half the renew deadline");
    env.clock.Advance(r.timeout);
    if (env.clock.Now() - renewed >= o.renew_deadline && elector->IsLeader())
      violations.push_back("still leader after the renew deadline");
    return FT::Error(Status::Timeout("operation timed out"));
  });
  elector = std::make_unique<LeaderElector>(*env.client, o);
  CancelToken cancel;
  elector->Run(cancel);
  BOOST_TEST(violations == std::vector<std::string>{});
  BOOST_TEST(stopped == 1);
  BOOST_TEST(!elector->IsLeader());
  BOOST_TEST(writes == 3);
  // Run gave up at the renew deadline, not a retry period (or a timeout) later.
  BOOST_TEST((env.clock.Now() - renewed == o.renew_deadline));
}

// The lease has a client of its own: informers and bulk actions that use up the
// shared token bucket do not delay a renewal, and a failed call is not retried
// (the elector retries within the renew deadline instead).
BOOST_AUTO_TEST_CASE(renewal_has_its_own_token_bucket_and_no_retries) {
  LeaseServer server;
  ClientOptions co;
  co.qps = 1;
  co.burst = 1;
  Env env(co);
  server.Install(*env.transport);
  LeaderElector a(*env.client, Opts("a"));
  for (int i = 0; i < 5; ++i)
    env.client->Request("GET", "/version");  // the shared bucket is empty now
  const auto slept = env.clock.total_slept();
  BOOST_TEST(a.TryAcquireOrRenew());
  BOOST_TEST((env.clock.total_slept() == slept));  // no wait for the shared bucket
  const size_t before = env.requests().size();
  env.transport->Push(
      FT::Json(503, StatusJson(503, "ServiceUnavailable", "busy"), {{"Retry-After", "1"}}));
  BOOST_TEST(!a.TryAcquireOrRenew());
  BOOST_TEST(env.requests().size() == before + 1);  // not retried after Retry-After
  BOOST_TEST(a.IsLeader());                         // within the renew deadline still
}

// Candidates that start together spread their acquisition attempts (client-go's
// JitterFactor 1.2): the wait is retry_period * (1 + 1.2 * random).
BOOST_AUTO_TEST_CASE(acquisition_retries_are_jittered) {
  LeaseServer server;
  ClientOptions co;
  co.random = [] { return 0.5; };
  Env env(co);
  server.Install(*env.transport);
  {
    LeaderElector holder(*env.client, Opts("holder"));
    BOOST_TEST(holder.TryAcquireOrRenew());
  }
  auto o = Opts("b");
  CancelToken cancel;
  o.on_started_leading = [&] { cancel.Cancel(); };
  LeaderElector b(*env.client, o);
  b.Run(cancel);  // waits until the holder's 15 s lease ran out on b's clock
  // Attempts at 0, 3.2, 6.4, 9.6, 12.8 and 16 s: the sixth one takes the lease.
  BOOST_TEST((env.clock.total_slept() == 16s));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
