// k8sbridge-prolog's wait: a job's powering-up nodes read from a scripted Slurm
// whose nodes come up (or go DOWN) after a number of reads.
#include <map>

#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "k8sbridge/power/await_nodes.h"

namespace power = k8sbridge::power;
namespace slurm = k8sbridge::slurm;
using k8sbridge::Result;
using k8sbridge::Status;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// A node boots: it reads POWERING_UP for `reads_until_up` single reads, then IDLE
// (or DOWN, with down=true, as after a failed resume or ResumeTimeout).
struct Boot {
  int reads_until_up = 0;
  bool down = false;
  bool never = false;  // powering up for ever
};

class BootingSlurm final : public slurm::Slurm {
 public:
  explicit BootingSlurm(std::map<std::string, Boot> boots) : boots_(std::move(boots)) {}
  Result<std::vector<slurm::Node>> LoadNodes() override {
    ++all_reads;
    if (unreadable)
      return Status::Unavailable("slurm_load_node: Unable to contact slurm controller");
    std::vector<slurm::Node> out;
    for (const auto& [name, boot] : boots_)
      out.push_back(Current(name, boot));
    return out;
  }
  Result<slurm::Node> LoadNode(std::string_view name) override {
    ++single_reads[std::string(name)];
    if (unreadable)
      return Status::Unavailable("slurm_load_node_single: Unable to contact slurm controller");
    auto it = boots_.find(std::string(name));
    if (it == boots_.end())
      return Status::NotFound("Slurm has no node " + std::string(name));
    --it->second.reads_until_up;
    return Current(it->first, it->second);
  }
  Status Drain(std::string_view, std::string_view) override { return Unused(); }
  Status Undrain(std::string_view) override { return Unused(); }
  Status Fail(std::string_view, std::string_view) override { return Unused(); }
  Status ReturnToService(std::string_view) override { return Unused(); }
  Status PowerDown(std::string_view) override { return Unused(); }
  Status Reboot(std::string_view, std::string_view) override { return Unused(); }
  Status SetFeatures(std::string_view, std::string_view, std::string_view) override {
    return Unused();
  }
  bool SupportsTopologyUpdate() const override { return false; }
  Status SetTopology(std::string_view, std::string_view) override { return Unused(); }
  Result<std::string> MungeSocket() override { return Unused(); }
  Result<slurm::Timeouts> LoadTimeouts() override { return Unused(); }

  bool unreadable = false;
  int all_reads = 0;
  std::map<std::string, int> single_reads;

 private:
  static Status Unused() { return Status::Internal("not used by the wait"); }
  static slurm::Node Current(const std::string& name, const Boot& boot) {
    slurm::Node n;
    n.name = name;
    n.cloud = true;
    n.base = slurm::Node::Base::kAllocated;
    const bool booting = boot.never || boot.reads_until_up > 0;
    if (boot.down && !booting) {
      n.base = slurm::Node::Base::kDown;
      n.powered_down = true;  // DOWN + POWER_DOWN, as k8sbridge-power fails a node
    }
    n.powering_up = booting;
    return n;
  }
  std::map<std::string, Boot> boots_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(await_nodes)

BOOST_AUTO_TEST_CASE(nodes_already_up_cost_one_read_and_no_wait) {
  BootingSlurm slurm({{"w-0", {}}, {"w-1", {}}});
  k8sbridge::FakeClock clock;
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0", "w-1"}, {});
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kUp);
  BOOST_CHECK_EQUAL(report.reads, 1);
  BOOST_CHECK(slurm.single_reads.empty());
  BOOST_CHECK(clock.total_slept() == k8sbridge::Clock::Steady::duration::zero());
}

BOOST_AUTO_TEST_CASE(ends_when_the_last_node_is_up_polling_only_the_ones_not_up) {
  // w-0 is up; w-1 comes up on its 3rd single read, w-2 on its 2nd (by then it is
  // up already: one read).
  BootingSlurm slurm({{"w-0", {}}, {"w-1", {3}}, {"w-2", {1}}});
  k8sbridge::FakeClock clock;
  power::AwaitOptions options;
  options.poll_interval = milliseconds(200);
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0", "w-1", "w-2"}, options);
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kUp);
  BOOST_CHECK_EQUAL(slurm.single_reads.count("w-0"), 0u);
  BOOST_CHECK_EQUAL(slurm.single_reads["w-1"], 3);
  BOOST_CHECK_EQUAL(slurm.single_reads["w-2"], 1);
  BOOST_CHECK_EQUAL(report.reads, 1 + 3 + 1);
  BOOST_CHECK(clock.total_slept() == milliseconds(400));  // two polls of w-1 came back booting
  BOOST_CHECK(report.waited == milliseconds(400));
}

BOOST_AUTO_TEST_CASE(a_node_that_goes_down_ends_the_wait_naming_it) {
  BootingSlurm slurm({{"w-0", {2, true}}, {"w-1", {.never = true}}});
  k8sbridge::FakeClock clock;
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0", "w-1"}, {});
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kNodeDown);
  BOOST_CHECK_EQUAL(report.node, "w-0");
  BOOST_CHECK_EQUAL(slurm.single_reads.count("w-1"), 0u);
}

BOOST_AUTO_TEST_CASE(a_node_down_at_the_first_read_ends_it_at_once) {
  BootingSlurm slurm({{"w-0", {}}, {"w-1", {0, true}}});
  k8sbridge::FakeClock clock;
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0", "w-1"}, {});
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kNodeDown);
  BOOST_CHECK_EQUAL(report.node, "w-1");
  BOOST_CHECK_EQUAL(report.reads, 1);
}

BOOST_AUTO_TEST_CASE(a_node_that_never_comes_up_ends_at_the_limit_exactly) {
  BootingSlurm slurm({{"w-0", {.never = true}}});
  k8sbridge::FakeClock clock;
  power::AwaitOptions options;
  options.poll_interval = milliseconds(300);
  options.limit = seconds(1);
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0"}, options);
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kTimedOut);
  BOOST_CHECK_EQUAL(report.node, "w-0");
  BOOST_CHECK(clock.total_slept() == seconds(1));  // the last sleep is cut to the limit
}

BOOST_AUTO_TEST_CASE(unreadable_slurm_ends_at_the_limit_with_its_error) {
  BootingSlurm slurm({{"w-0", Boot{}}, {"w-9", Boot{}}});
  slurm.unreadable = true;
  k8sbridge::FakeClock clock;
  power::AwaitOptions options;
  options.limit = seconds(2);
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0"}, options);
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kUnreadable);
  BOOST_CHECK_EQUAL(report.last_error.message(),
                    "slurm_load_node_single: Unable to contact slurm controller");
  BOOST_CHECK(clock.total_slept() == seconds(2));
}

BOOST_AUTO_TEST_CASE(a_node_slurm_does_not_have_is_not_waited_for) {
  BootingSlurm slurm({{"w-0", Boot{}}, {"w-9", Boot{}}});
  k8sbridge::FakeClock clock;
  auto report = power::AwaitNodesUp(slurm, clock, {"w-0", "gone-1"}, {});
  BOOST_CHECK(report.outcome == power::AwaitOutcome::kUp);
}

BOOST_AUTO_TEST_CASE(the_limit_follows_resume_timeout_and_stays_under_the_prolog_timeout) {
  using Timeouts = slurm::Timeouts;
  BOOST_CHECK(power::AwaitLimit(Timeouts{seconds(120), seconds(0)}) == seconds(135));
  BOOST_CHECK(power::AwaitLimit(Timeouts{seconds(120), seconds(60)}) == seconds(55));
  BOOST_CHECK(power::AwaitLimit(Timeouts{seconds(0), seconds(0)}) == seconds(75));
  BOOST_CHECK(power::AwaitLimit(Status::Unavailable("no controller")) == seconds(75));
}

BOOST_AUTO_TEST_SUITE_END()
