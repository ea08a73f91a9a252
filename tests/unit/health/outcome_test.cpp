#include <boost/test/unit_test.hpp>

#include "health_fixture.h"
#include "k8sbridge/health/outcome.h"
#include "recording_slurm.h"

using namespace k8sbridge::health;
using k8sbridge::slurm::Node;
using k8sbridge::slurm::RecordingSlurm;

namespace {

const std::vector<Finding> kXid = {
    {"gpu.xid", "GPU 3", "XID 79 (GPU has fallen off the bus)", Severity::kHardware}};
const std::string kXidReason =
    "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)";

// One IDLE Slurm node "w-0".
std::vector<Node> W0(bool drain, std::string reason, std::string gres) {
  Node n;
  n.name = "w-0";
  n.base = Node::Base::kIdle;
  n.drain = drain;
  n.reason = std::move(reason);
  n.gres = std::move(gres);
  return {n};
}

// Runs the decide/apply loop `runs` times with the given findings.
unsigned Run(RecordingSlurm& slurm, const std::vector<Finding>& findings, unsigned clean,
             unsigned resume_after = 2) {
  Decision d = Decide(*slurm.LoadNode("w-0"), findings, clean, resume_after);
  BOOST_REQUIRE(Apply(d, "w-0", slurm).ok());
  return d.clean_runs;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(outcome)

BOOST_AUTO_TEST_CASE(failing_check_drains_with_owned_reason_once) {
  RecordingSlurm slurm(W0(false, "", "gpu:8"));
  unsigned clean = Run(slurm, kXid, 0);
  clean = Run(slurm, kXid, clean);
  BOOST_REQUIRE_EQUAL(slurm.calls().size(), 1u);
  BOOST_TEST(slurm.calls()[0] == "drain w-0 " + kXidReason);
}

BOOST_AUTO_TEST_CASE(resumes_own_drain_only_after_clean_runs) {
  RecordingSlurm slurm(W0(true, kXidReason, ""));
  unsigned clean = Run(slurm, {}, 0, 3);
  clean = Run(slurm, {}, clean, 3);
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(slurm.Find("w-0")->drain);
  clean = Run(slurm, {}, clean, 3);
  BOOST_REQUIRE_EQUAL(slurm.calls().size(), 1u);
  BOOST_TEST(slurm.calls()[0] == "undrain w-0");
  BOOST_TEST(clean == 3u);
}

BOOST_AUTO_TEST_CASE(a_failure_restarts_the_clean_count) {
  RecordingSlurm slurm(W0(true, kXidReason, ""));
  unsigned clean = Run(slurm, {}, 0, 2);
  clean = Run(slurm, kXid, clean, 2);
  BOOST_TEST(clean == 0u);
  clean = Run(slurm, {}, clean, 2);
  BOOST_TEST(slurm.calls().empty());
  Run(slurm, {}, clean, 2);
  BOOST_TEST(slurm.calls().size() == 1u);
}

BOOST_AUTO_TEST_CASE(admin_drain_is_never_touched) {
  for (const char* reason :
       {"maintenance by alice", "[hardware] replace PSU", "k8sbridge: NotReady"}) {
    RecordingSlurm slurm(W0(true, reason, ""));
    unsigned clean = 0;
    for (int i = 0; i < 5; ++i)
      clean = Run(slurm, {}, clean);
    Run(slurm, kXid, clean);
    BOOST_TEST(slurm.calls().empty(), reason);
    BOOST_TEST(slurm.Find("w-0")->reason == reason);
  }
}

BOOST_AUTO_TEST_CASE(a_down_node_keeps_a_reason_that_is_not_ours) {
  // Slurm's own "Not responding" and an admin's DOWN are out of service already: a
  // failing check must not write its reason over them.
  for (const char* reason : {"Not responding", "admin: bad cable"}) {
    RecordingSlurm slurm(W0(false, reason, ""));
    slurm.Find("w-0")->base = Node::Base::kDown;
    Run(slurm, kXid, 0);
    BOOST_TEST(slurm.calls().empty(), reason);
    BOOST_TEST(slurm.Find("w-0")->reason == reason);
  }
}

BOOST_AUTO_TEST_CASE(an_admin_drain_set_while_the_checks_ran_is_not_cleared) {
  // Our drain, enough clean runs to resume; the program reads the node, runs the
  // checks, and an admin drains the node meanwhile: the decision is taken on a
  // fresh read, so the admin's drain stays.
  RecordingSlurm slurm(W0(true, kXidReason, ""));
  BOOST_REQUIRE(slurm.LoadNode("w-0").ok());  // the read before the checks
  slurm.SetNodes(W0(true, "admin: reseat GPU 3", ""));
  Outcome out = DecideAndApply("w-0", {}, 5, 2, slurm);
  BOOST_TEST(out.status.ok());
  BOOST_TEST((out.decision.action == Action::kLeaveForeignDrain));
  BOOST_TEST(slurm.calls().empty());
  BOOST_TEST(slurm.Find("w-0")->reason == "admin: reseat GPU 3");
}

BOOST_AUTO_TEST_CASE(an_unreadable_node_changes_nothing) {
  RecordingSlurm slurm(W0(true, kXidReason, ""));
  Outcome out = DecideAndApply("w-9", kXid, 4, 2, slurm);
  BOOST_TEST(!out.status.ok());
  BOOST_TEST(out.decision.clean_runs == 4u);
  BOOST_TEST(slurm.calls().empty());
}

BOOST_AUTO_TEST_CASE(only_hardware_findings_ask_for_a_repair) {
  // NVML missing from the pod drains the node (no GPU job could run there) with
  // an untagged reason: the sync daemon cordons only "[hardware]" drains.
  const Finding no_nvml = {"gpu.nvml", "",
                           "expected 8 GPUs, but NVML is not available (cannot load "
                           "libnvidia-ml.so.1)",
                           Severity::kNode};
  RecordingSlurm slurm(W0(false, "", "gpu:8"));
  Run(slurm, {no_nvml}, 0);
  BOOST_REQUIRE_EQUAL(slurm.calls().size(), 1u);
  BOOST_TEST(slurm.calls()[0] ==
             "drain w-0 k8sbridge-health: expected 8 GPUs, but NVML is not available (cannot "
             "load libnvidia-ml.so.1)");
  // With a hardware finding as well, the hardware leads and tags the reason.
  BOOST_TEST(DrainReason({no_nvml, kXid[0]}) == kXidReason + " (+1 more)");
}

BOOST_AUTO_TEST_CASE(own_reason_recognised) {
  BOOST_TEST(IsOwnReason(kXidReason));
  BOOST_TEST(IsOwnReason("k8sbridge-health: jail /jail not mounted"));
  BOOST_TEST(!IsOwnReason("[hardware] xid 79 by admin"));
  BOOST_TEST(!IsOwnReason("k8sbridge: pod evicted"));
}

BOOST_AUTO_TEST_CASE(state_survives_a_round_trip) {
  TempDir d;
  std::string path = (d.path / "sub" / "w-0.state").string();
  auto fresh = LoadState(path);
  BOOST_REQUIRE(fresh.ok());
  BOOST_TEST(fresh->clean_runs == 0u);
  BOOST_TEST(!fresh->has_kmsg_sequence);
  BOOST_REQUIRE(SaveState(path, {3, 4242, true}).ok());
  auto back = LoadState(path);
  BOOST_TEST(back->clean_runs == 3u);
  BOOST_TEST(back->kmsg_sequence == 4242u);
  BOOST_TEST(back->has_kmsg_sequence);
}

BOOST_AUTO_TEST_SUITE_END()
