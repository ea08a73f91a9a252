#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fake_clock.h"
#include "k8sbridge/supervise.h"
#include "recording_logger.h"

using k8sbridge::Companion;
using k8sbridge::FakeClock;
using k8sbridge::Reaped;
using k8sbridge::RecordingLogger;
using k8sbridge::Result;
using k8sbridge::Status;
using k8sbridge::SuperviseRequest;

namespace {

constexpr int kDaemon = 40;
constexpr int kMunged = 12;

// A scripted PID 1's world: NextSignal hands out `signals` in order; a SIGCHLD's
// entry says which children ended with it. Signals sent are recorded; a process
// in `dies_on_term` ends (and can be reaped) when it gets SIGTERM.
class FakeInitSystem final : public k8sbridge::InitSystem {
 public:
  struct Event {
    int signal = SIGCHLD;
    std::vector<Reaped> ended;
  };

  k8sbridge::Clock& clock() override { return clock_; }
  Result<int> Spawn(const std::vector<std::string>& argv) override {
    spawned = argv;
    if (!spawn_status.ok())
      return spawn_status;
    alive.insert(kDaemon);
    return kDaemon;
  }
  std::optional<int> NextSignal(std::chrono::milliseconds timeout) override {
    if (events.empty()) {
      clock_.Advance(timeout);
      return std::nullopt;
    }
    Event e = events.front();
    events.pop_front();
    for (const auto& r : e.ended)
      ended.push_back(r);
    return e.signal;
  }
  std::optional<Reaped> ReapOne() override {
    if (ended.empty())
      return std::nullopt;
    Reaped r = ended.front();
    ended.pop_front();
    alive.erase(r.pid);
    reaped.push_back(r.pid);
    return r;
  }
  void Signal(int pid, int signal) override {
    sent.push_back(fmt::format("{} {}", pid, signal));
    if (signal == SIGTERM && dies_on_term.count(pid) && alive.count(pid))
      events.push_back({SIGCHLD, {{pid, W_EXITCODE(0, 0)}}});
  }
  bool Alive(int pid) override { return alive.count(pid) > 0; }

  FakeClock clock_;
  Status spawn_status;
  std::deque<Event> events;
  std::deque<Reaped> ended;
  std::set<int> alive;
  std::set<int> dies_on_term;
  std::vector<std::string> spawned;
  std::vector<std::string> sent;  // "pid signal"
  std::vector<int> reaped;
};

SuperviseRequest Request(std::vector<Companion> companions = {}) {
  SuperviseRequest r;
  r.argv = {"/usr/sbin/slurmd", "-D"};
  r.name = "slurmd";
  r.companions = std::move(companions);
  return r;
}

Companion Munged() {
  Companion c;
  c.pid = kMunged;
  c.name = "munged";
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(supervise)

BOOST_AUTO_TEST_CASE(exit_codes_are_the_childs_or_128_plus_the_signal) {
  BOOST_TEST(k8sbridge::ExitCodeOf(W_EXITCODE(0, 0)) == 0);
  BOOST_TEST(k8sbridge::ExitCodeOf(W_EXITCODE(3, 0)) == 3);
  BOOST_TEST(k8sbridge::ExitCodeOf(W_EXITCODE(0, SIGTERM)) == 143);
  BOOST_TEST(k8sbridge::ExitCodeOf(W_EXITCODE(0, SIGKILL)) == 137);
  BOOST_TEST(k8sbridge::DescribeWaitStatus(W_EXITCODE(0, SIGTERM)) == "was killed by SIGTERM");
  BOOST_TEST(k8sbridge::DescribeWaitStatus(W_EXITCODE(2, 0)) == "exited with status 2");
}

BOOST_AUTO_TEST_CASE(every_stop_and_reconfigure_signal_is_passed_on_to_the_daemon) {
  FakeInitSystem system;
  RecordingLogger log;
  std::vector<std::string> want;
  for (int s : k8sbridge::ForwardedSignals()) {
    system.events.push_back({s, {}});
    want.push_back(fmt::format("{} {}", kDaemon, s));
  }
  system.events.push_back({SIGCHLD, {{kDaemon, W_EXITCODE(0, SIGTERM)}}});
  auto code = k8sbridge::Supervise(Request(), system, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(*code == 143);
  BOOST_TEST(system.spawned == (std::vector<std::string>{"/usr/sbin/slurmd", "-D"}));
  BOOST_TEST(system.sent == want, boost::test_tools::per_element());
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    BOOST_TEST(std::count(k8sbridge::ForwardedSignals().begin(),
                          k8sbridge::ForwardedSignals().end(), s) == 1);
  BOOST_TEST(log.Contains("passing SIGTERM on to slurmd (pid 40)"));
  BOOST_TEST(log.Contains("slurmd was killed by SIGTERM: exit code 143"));
}

BOOST_AUTO_TEST_CASE(orphans_are_reaped_and_only_the_daemons_end_ends_it) {
  FakeInitSystem system;
  RecordingLogger log;
  // Two orphaned slurmstepds end first, one of them with the daemon.
  system.events.push_back({SIGCHLD, {{71, W_EXITCODE(0, 0)}}});
  system.events.push_back({SIGCHLD, {{72, W_EXITCODE(1, 0)}, {kDaemon, W_EXITCODE(5, 0)}}});
  system.events.push_back({SIGCHLD, {{73, W_EXITCODE(0, 0)}}});  // never read
  auto code = k8sbridge::Supervise(Request(), system, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(*code == 5);
  BOOST_TEST(system.reaped == (std::vector<int>{71, 72, kDaemon}),
             boost::test_tools::per_element());
  BOOST_TEST(system.sent.empty());
}

BOOST_AUTO_TEST_CASE(an_idle_wake_reaps_too) {
  FakeInitSystem system;
  RecordingLogger log;
  system.ended.push_back({kDaemon, W_EXITCODE(0, 0)});  // no SIGCHLD seen: NextSignal times out
  auto code = k8sbridge::Supervise(Request(), system, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(*code == 0);
}

BOOST_AUTO_TEST_CASE(the_companion_is_stopped_after_the_daemon_and_reaped) {
  FakeInitSystem system;
  system.alive.insert(kMunged);
  system.dies_on_term.insert(kMunged);
  RecordingLogger log;
  system.events.push_back({SIGTERM, {}});
  system.events.push_back({SIGCHLD, {{kDaemon, W_EXITCODE(0, 0)}}});
  auto code = k8sbridge::Supervise(Request({Munged()}), system, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(*code == 0);
  BOOST_TEST(system.sent == (std::vector<std::string>{fmt::format("{} {}", kDaemon, SIGTERM),
                                                      fmt::format("{} {}", kMunged, SIGTERM)}),
             boost::test_tools::per_element());
  BOOST_TEST(system.reaped.back() == kMunged);
  BOOST_TEST(log.Contains("stopping munged (pid 12)"));
}

BOOST_AUTO_TEST_CASE(a_companion_that_ignores_sigterm_gets_it_again_then_sigkill) {
  FakeInitSystem system;
  system.alive.insert(kMunged);
  RecordingLogger log;
  system.events.push_back({SIGCHLD, {{kDaemon, W_EXITCODE(0, 0)}}});
  SuperviseRequest request = Request({Munged()});
  request.companion_grace = std::chrono::milliseconds(2000);
  BOOST_REQUIRE(k8sbridge::Supervise(request, system, log).ok());
  const auto term = fmt::format("{} {}", kMunged, SIGTERM);
  BOOST_TEST(std::count(system.sent.begin(), system.sent.end(), term) > 1);
  BOOST_TEST(system.sent.back() == fmt::format("{} {}", kMunged, SIGKILL));
  const auto waited = system.clock_.Now() - k8sbridge::Clock::Steady::time_point{};
  BOOST_TEST((waited >= request.companion_grace));
  BOOST_TEST(log.Contains("still running 2000 ms after SIGTERM: sending SIGKILL"));
}

BOOST_AUTO_TEST_CASE(a_daemon_that_cannot_start_fails_and_still_stops_the_companion) {
  FakeInitSystem system;
  system.spawn_status =
      Status::IoError("fork for /usr/sbin/slurmd: Resource temporarily unavailable");
  system.alive.insert(kMunged);
  system.dies_on_term.insert(kMunged);
  RecordingLogger log;
  auto code = k8sbridge::Supervise(Request({Munged()}), system, log);
  BOOST_REQUIRE(!code.ok());
  BOOST_TEST(code.status().message().find("starting slurmd") != std::string::npos,
             code.status().message());
  BOOST_TEST(system.sent == (std::vector<std::string>{fmt::format("{} {}", kMunged, SIGTERM)}));
}

BOOST_AUTO_TEST_SUITE_END()
