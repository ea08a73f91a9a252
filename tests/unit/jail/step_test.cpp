#include <boost/test/unit_test.hpp>

#include "fake_jail_system.h"
#include "k8sbridge/jail/step.h"
#include "recording_logger.h"

namespace k8sbridge::jail {
namespace {

Options TestOptions() {
  Options o;
  o.jail = "/srv/jail";
  o.tmp_base = "/var/lib/jt";
  o.binds = {Bind{"/scratch", "/scratch", false}, Bind{"/tmp/rig", "/tmp/rig", false}};
  return o;
}

StepInfo Step(uint32_t step_id) {
  StepInfo s;
  s.job_id = 42;
  s.step_id = step_id;
  s.uid = 1000;
  s.user = "alice";
  s.node = "w-0";
  return s;
}

BOOST_AUTO_TEST_SUITE(jail_step)

BOOST_AUTO_TEST_CASE(batch_normal_and_interactive_steps_enter_the_jail) {
  for (uint32_t id : {kBatchStep, kInteractiveStep, 0u, 3u}) {
    FakeJailSystem sys;
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    BOOST_REQUIRE(step.Prepare(Step(id)).ok());
    BOOST_TEST(step.active());
    BOOST_TEST(step.EnterTask().ok());
    BOOST_TEST(step.CheckTaskUser().ok());
    // No job namespace to join (the fake has none): the task enters on its own.
    std::vector<std::string> want = {"open_ns w-0 42",       "probe",       "check_root",
                                     "create_tmp w-0 42",    "check_binds", "enter",
                                     "check_user alice 1000"};
    BOOST_TEST(sys.calls == want, boost::test_tools::per_element());
    BOOST_REQUIRE(sys.entered.size() == 1u);
    const TaskPlan& plan = sys.entered[0];
    BOOST_TEST(plan.jail == "/srv/jail");
    BOOST_REQUIRE(plan.mounts.size() == 5u);
    using Kind = TaskMount::Kind;
    BOOST_TEST((plan.mounts[0] == TaskMount{"/var/lib/jt/w-0/job42", "/tmp", false, false}));
    // The job's own /var/tmp and /dev/shm, where the jail has them.
    BOOST_TEST((plan.mounts[1] == TaskMount{"/var/lib/jt/w-0/job42.var-tmp", "/var/tmp", false,
                                            false, Kind::kBind, true}));
    BOOST_TEST((plan.mounts[2] == TaskMount{"", "/dev/shm", false, false, Kind::kTmpfs, true}));
    BOOST_TEST((plan.mounts[3] == TaskMount{"/scratch", "/scratch", false, false}));
    // Under the private /tmp the plugin may create the mount point.
    BOOST_TEST((plan.mounts[4] == TaskMount{"/tmp/rig", "/tmp/rig", false, true}));
    BOOST_TEST(sys.drains.empty());
  }
}

BOOST_AUTO_TEST_CASE(extern_step_stays_on_the_host_and_starts_the_job_namespace) {
  FakeJailSystem sys;
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_REQUIRE(step.Prepare(Step(kExternStep)).ok());
  BOOST_TEST(!step.active());
  BOOST_TEST(step.EnterTask().ok());
  std::vector<std::string> want = {"probe", "check_root", "create_tmp w-0 42", "check_binds",
                                   "start_ns w-0 42"};
  BOOST_TEST(sys.calls == want, boost::test_tools::per_element());
  // The namespace gets the same plan a task would carry out itself.
  BOOST_REQUIRE(sys.entered.size() == 1u);
  BOOST_TEST(sys.entered[0].mounts.size() == 5u);
}

BOOST_AUTO_TEST_CASE(namespace_task_mode_leaves_the_extern_step_alone) {
  Options o = TestOptions();
  o.ns = NamespaceMode::kTask;
  FakeJailSystem sys;
  RecordingLogger log;
  JailStep extern_step(o, sys, log);
  BOOST_REQUIRE(extern_step.Prepare(Step(kExternStep)).ok());
  BOOST_TEST(sys.calls.empty());
  JailStep step(o, sys, log);
  BOOST_REQUIRE(step.Prepare(Step(0)).ok());
  BOOST_TEST(step.EnterTask().ok());
  std::vector<std::string> want = {"probe", "check_root", "create_tmp w-0 42", "check_binds",
                                   "enter"};
  BOOST_TEST(sys.calls == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_broken_jail_never_fails_the_extern_step) {
  FakeJailSystem sys;
  sys.probe_result = Status::NotFound("jail /srv/jail looks unmounted or empty");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  // Failing it would fail the job's prolog; the job's own steps report instead.
  BOOST_REQUIRE(step.Prepare(Step(kExternStep)).ok());
  BOOST_TEST((sys.calls == std::vector<std::string>{"probe"}), boost::test_tools::per_element());
  BOOST_TEST(sys.drains.empty());
  BOOST_TEST(log.Contains("no job namespace (jail /srv/jail looks unmounted", LogLevel::kWarning));

  FakeJailSystem sys2;
  sys2.start_ns_result = Status::Timeout("the job namespace holder did not enter jail /srv/jail");
  JailStep step2(TestOptions(), sys2, log);
  BOOST_REQUIRE(step2.Prepare(Step(kExternStep)).ok());
  BOOST_TEST(sys2.drains.empty());
  BOOST_TEST(log.Contains("holder did not enter jail", LogLevel::kWarning));
}

BOOST_AUTO_TEST_CASE(steps_join_the_job_namespace_when_there_is_one) {
  FakeJailSystem sys;
  sys.open_ns_result = Status::Ok();
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_REQUIRE(step.Prepare(Step(3)).ok());
  BOOST_TEST(step.active());
  BOOST_TEST(step.joins_job_namespace());
  BOOST_TEST(step.EnterTask().ok());
  BOOST_TEST(step.CheckTaskUser().ok());
  // The holder's answer is the probe; the root is still checked per step; the
  // private /tmp and binds are the namespace's already.
  std::vector<std::string> want = {"open_ns w-0 42", "check_root", "join_ns",
                                   "check_user alice 1000"};
  BOOST_TEST(sys.calls == want, boost::test_tools::per_element());
  BOOST_TEST(sys.entered.empty());
}

BOOST_AUTO_TEST_CASE(a_jail_broken_since_the_job_started_still_drains) {
  for (Status holder_says : {Status::NotFound("jail /srv/jail looks unmounted or empty"),
                             Status::Timeout("jail /srv/jail did not answer within 5000 ms")}) {
    FakeJailSystem sys;
    sys.open_ns_result = holder_says;
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    BOOST_TEST(!step.Prepare(Step(3)).ok());
    BOOST_TEST(!step.active());
    BOOST_TEST((sys.calls == std::vector<std::string>{"open_ns w-0 42", "drain"}),
               boost::test_tools::per_element());
    BOOST_REQUIRE(sys.drains.size() == 1u);
    BOOST_TEST(sys.drains[0] == "w-0: spank_jail: " + holder_says.message());
  }
}

BOOST_AUTO_TEST_CASE(no_jail_is_ignored_unless_the_admin_allows_it) {
  StepInfo info = Step(0);
  info.no_jail_requested = true;
  {
    FakeJailSystem sys;
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    BOOST_REQUIRE(step.Prepare(info).ok());
    BOOST_TEST(step.active());
    BOOST_TEST(log.Contains("has not allowed", LogLevel::kWarning));
    BOOST_TEST(step.EnterTask().ok());
    BOOST_TEST(sys.entered.size() == 1u);
  }
  {
    Options o = TestOptions();
    o.allow_no_jail = true;
    FakeJailSystem sys;
    RecordingLogger log;
    JailStep step(o, sys, log);
    BOOST_REQUIRE(step.Prepare(info).ok());
    BOOST_TEST(!step.active());
    BOOST_TEST(step.EnterTask().ok());
    BOOST_TEST(sys.entered.empty());
  }
}

BOOST_AUTO_TEST_CASE(broken_jail_fails_the_step_and_drains_the_node) {
  FakeJailSystem sys;
  sys.probe_result = Status::Timeout("jail /srv/jail did not answer within 5000 ms");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  Status s = step.Prepare(Step(kBatchStep));
  BOOST_TEST((s.code() == Status::Code::kTimeout));
  BOOST_TEST(!step.active());
  BOOST_REQUIRE(sys.drains.size() == 1u);
  BOOST_TEST(sys.drains[0] == "w-0: spank_jail: jail /srv/jail did not answer within 5000 ms");
  // Nothing touched the jail after the probe failed.
  BOOST_TEST((sys.calls == std::vector<std::string>{"open_ns w-0 42", "probe", "drain"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(unsafe_jail_is_refused_and_drains) {
  FakeJailSystem sys;
  sys.root_result = Status::PermissionDenied("jail /srv/jail is writable by others");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_TEST(!step.Prepare(Step(0)).ok());
  BOOST_TEST(sys.drains.size() == 1u);
  BOOST_TEST(sys.drains[0].find("spank_jail: jail /srv/jail is writable by others") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(bind_escaping_the_jail_is_refused_and_drains) {
  FakeJailSystem sys;
  sys.binds_result = Status::PermissionDenied(
      "bind /scratch: path /scratch in jail /srv/jail resolves through a symlink out of the jail");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_TEST(!step.Prepare(Step(0)).ok());
  BOOST_TEST(!step.active());
  BOOST_REQUIRE(sys.drains.size() == 1u);
  BOOST_TEST(sys.drains[0].find("symlink out of the jail") != std::string::npos);
}

// With `optional` in plugstack.conf Slurm ignores a failed init_post_opt and
// forks the tasks anyway: EnterTask must then refuse, so the plugin ends them.
BOOST_AUTO_TEST_CASE(a_step_whose_prepare_failed_or_never_ran_refuses_its_tasks) {
  FakeJailSystem sys;
  sys.probe_result = Status::NotFound("jail /srv/jail looks unmounted or empty");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_TEST(!step.Prepare(Step(3)).ok());
  Status s = step.EnterTask();
  BOOST_TEST(!s.ok());
  BOOST_TEST(
      s.message().find("job 42 step 3: the jail was not set up for this step") != std::string::npos,
      s.message());
  BOOST_TEST(sys.entered.empty());
  JailStep never(TestOptions(), sys, log);
  BOOST_TEST(!never.EnterTask().ok());
}

BOOST_AUTO_TEST_CASE(root_jobs_are_refused_per_task_unless_allowed) {
  StepInfo root = Step(3);
  root.uid = 0;
  root.user = "root";
  {
    FakeJailSystem sys;
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    // Not a step failure: a failed batch step would drain the node.
    BOOST_REQUIRE(step.Prepare(root).ok());
    Status s = step.EnterTask();
    BOOST_TEST((s.code() == Status::Code::kPermissionDenied));
    BOOST_TEST(s.message().find("job 42 step 3 runs as root (uid 0)") != std::string::npos);
    BOOST_TEST(s.message().find("allow_root=yes") != std::string::npos, s.message());
    BOOST_TEST(sys.entered.empty());
    BOOST_TEST(sys.drains.empty());
    // Its extern step starts no namespace for it.
    JailStep ext(TestOptions(), sys, log);
    StepInfo root_extern = root;
    root_extern.step_id = kExternStep;
    BOOST_REQUIRE(ext.Prepare(root_extern).ok());
    BOOST_TEST(ext.EnterTask().ok());
    BOOST_TEST(sys.calls.empty());
  }
  Options o = TestOptions();
  o.allow_root = true;
  FakeJailSystem sys;
  RecordingLogger log;
  JailStep step(o, sys, log);
  BOOST_REQUIRE(step.Prepare(root).ok());
  BOOST_TEST(step.EnterTask().ok());
  BOOST_TEST(sys.entered.size() == 1u);
}

BOOST_AUTO_TEST_CASE(drain_can_be_turned_off) {
  Options o = TestOptions();
  o.drain = false;
  FakeJailSystem sys;
  sys.probe_result = Status::NotFound("jail looks unmounted");
  RecordingLogger log;
  JailStep step(o, sys, log);
  BOOST_TEST(!step.Prepare(Step(0)).ok());
  BOOST_TEST(sys.drains.empty());
  BOOST_TEST(log.Contains("jail looks unmounted", LogLevel::kError));
}

BOOST_AUTO_TEST_CASE(unknown_user_fails_the_task_without_draining) {
  FakeJailSystem sys;
  sys.user_result = Status::NotFound("user alice (uid 1000) does not exist in jail /srv/jail");
  RecordingLogger log;
  JailStep step(TestOptions(), sys, log);
  BOOST_REQUIRE(step.Prepare(Step(0)).ok());
  BOOST_REQUIRE(step.EnterTask().ok());
  Status s = step.CheckTaskUser();
  BOOST_TEST(!s.ok());
  BOOST_TEST(sys.drains.empty());
  Options none = TestOptions();
  none.identity = IdentityCheck::kNone;
  FakeJailSystem sys2;
  sys2.user_result = sys.user_result;
  JailStep step2(none, sys2, log);
  BOOST_REQUIRE(step2.Prepare(Step(0)).ok());
  BOOST_TEST(step2.CheckTaskUser().ok());
}

BOOST_AUTO_TEST_CASE(failed_entry_or_join_names_jail_and_step) {
  for (bool join : {false, true}) {
    FakeJailSystem sys;
    if (join) {
      sys.open_ns_result = Status::Ok();
      sys.join_result = Status::IoError("setns into the job's mount namespace: Invalid argument");
    } else {
      sys.enter_result = Status::NotFound("bind target /scratch does not exist in jail /srv/jail");
    }
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    BOOST_REQUIRE(step.Prepare(Step(5)).ok());
    Status s = step.EnterTask();
    BOOST_TEST(s.message().find("entering jail /srv/jail for job 42 step 5") != std::string::npos,
               s.message());
    BOOST_TEST(s.message().find(join ? "setns" : "bind target") != std::string::npos, s.message());
    BOOST_TEST(sys.drains.empty());
  }
}

BOOST_AUTO_TEST_CASE(tmp_jail_mode_binds_no_private_tmp) {
  Options o = TestOptions();
  o.tmp = TmpMode::kJail;
  FakeJailSystem sys;
  RecordingLogger log;
  JailStep step(o, sys, log);
  BOOST_REQUIRE(step.Prepare(Step(0)).ok());
  BOOST_REQUIRE(step.plan().mounts.size() == 2u);
  BOOST_TEST(!step.plan().mounts[1].create_target);  // the jail's own /tmp is not ours
  BOOST_TEST(JobEpilog(o, sys, "w-0", 42, log).ok());
  std::vector<std::string> want = {"open_ns w-0 42", "probe", "check_root", "check_binds",
                                   "remove_ns w-0 42"};
  BOOST_TEST(sys.calls == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(epilog_removes_the_namespace_state_and_the_private_tmp) {
  FakeJailSystem sys;
  RecordingLogger log;
  BOOST_TEST(JobEpilog(TestOptions(), sys, "w-1", 9, log).ok());
  BOOST_TEST((sys.calls == std::vector<std::string>{"remove_ns w-1 9", "remove_tmp w-1 9"}),
             boost::test_tools::per_element());
}

// In its job namespace a job's /tmp and /var/tmp are tmpfs of tmp_size (charged
// to the job's memory, never the node's disk); a task's own namespace binds the
// job's directories, which every step of the job shares.
BOOST_AUTO_TEST_CASE(the_job_namespace_puts_tmp_on_size_limited_tmpfs) {
  Options o = TestOptions();
  o.tmp_size = "2g";
  using Kind = TaskMount::Kind;
  TaskPlan ns = BuildTaskPlan(o, "/var/lib/jt/w-0/job42", "", ViewFor::kJobNamespace);
  BOOST_REQUIRE(ns.mounts.size() == 5u);
  BOOST_TEST((ns.mounts[0] == TaskMount{"", "/tmp", false, false, Kind::kTmpfs, false, "2g"}));
  BOOST_TEST((ns.mounts[1] == TaskMount{"", "/var/tmp", false, false, Kind::kTmpfs, true, "2g"}));
  TaskPlan task = BuildTaskPlan(o, "/var/lib/jt/w-0/job42");
  BOOST_TEST((task.mounts[0] == TaskMount{"/var/lib/jt/w-0/job42", "/tmp", false, false}));

  FakeJailSystem sys;
  RecordingLogger log;
  JailStep step(o, sys, log);
  BOOST_REQUIRE(step.Prepare(Step(kExternStep)).ok());
  BOOST_REQUIRE(sys.entered.size() == 1u);
  BOOST_TEST((sys.entered[0].mounts[0].kind == Kind::kTmpfs));
  BOOST_TEST(sys.entered[0].mounts[0].tmpfs_size == "2g");
}

// Kubernetes makes /dev/termination-log writable by everyone in the pod: every
// view masks it with /dev/null, and the jail's own root is read-only, with only
// tmp=jail's /tmp and /var/tmp kept writable.
BOOST_AUTO_TEST_CASE(every_view_masks_the_termination_log) {
  using Kind = TaskMount::Kind;
  TaskMount mask{"/dev/null", "/dev/termination-log", true, false, Kind::kBind, true};
  for (ViewFor view : {ViewFor::kTask, ViewFor::kJobNamespace}) {
    TaskPlan plan = BuildTaskPlan(TestOptions(), "/var/lib/jt/w-0/job42", "", view);
    BOOST_REQUIRE(plan.system_mounts.size() == 1u);
    BOOST_TEST((plan.system_mounts[0] == mask));
    BOOST_TEST(plan.writable.empty());
  }
  Options o = TestOptions();
  o.tmp = TmpMode::kJail;
  TaskPlan shared = BuildTaskPlan(o, "");
  BOOST_TEST((shared.system_mounts.back() == mask));
  BOOST_TEST((shared.writable == std::vector<std::string>{"/tmp", "/var/tmp"}),
             boost::test_tools::per_element());
}

// slurmstepd forces its SLURM_CONF into every task. In a configless node that
// is slurmd's conf-cache, which the jail lacks: the view binds it read-only
// onto /etc/slurm and the task's SLURM_CONF names it there.
BOOST_AUTO_TEST_CASE(a_configless_slurm_conf_is_found_in_the_jail) {
  Options o = TestOptions();
  const std::string cache = "/var/spool/slurmd/conf-cache/slurm.conf";
  SlurmConfView conf = SlurmConfInJail(o, cache);
  BOOST_TEST(conf.host_dir == "/var/spool/slurmd/conf-cache");
  BOOST_TEST(conf.task_conf == "/etc/slurm/slurm.conf");
  // Already where tasks see it: /etc/slurm itself, or below a binds= source.
  BOOST_TEST(SlurmConfInJail(o, "/etc/slurm/slurm.conf").host_dir.empty());
  BOOST_TEST(SlurmConfInJail(o, "/etc/slurm/slurm.conf").task_conf.empty());
  o.binds.push_back(Bind{"/srv/rig", "/tmp/rig2", false});
  SlurmConfView bound = SlurmConfInJail(o, "/srv/rig/etc/slurm.conf");
  BOOST_TEST(bound.host_dir.empty());
  BOOST_TEST(bound.task_conf == "/tmp/rig2/etc/slurm.conf");
  BOOST_TEST(SlurmConfInJail(o, "").task_conf.empty());
  BOOST_TEST(SlurmConfInJail(o, "slurm.conf").task_conf.empty());

  TaskPlan plan = BuildTaskPlan(TestOptions(), "/var/lib/jt/w-0/job42", cache);
  BOOST_REQUIRE(plan.system_mounts.size() == 2u);
  BOOST_TEST((plan.system_mounts[0] ==
              TaskMount{"/var/spool/slurmd/conf-cache", "/etc/slurm", true, false}));

  for (bool join : {false, true}) {
    FakeJailSystem sys;
    if (join)
      sys.open_ns_result = Status::Ok();
    RecordingLogger log;
    JailStep step(TestOptions(), sys, log);
    StepInfo info = Step(kBatchStep);
    info.slurm_conf = cache;
    BOOST_REQUIRE(step.Prepare(info).ok());
    BOOST_TEST(step.task_slurm_conf() == "/etc/slurm/slurm.conf");
    if (!join)
      BOOST_TEST(step.plan().system_mounts.size() == 2u);
  }
}

BOOST_AUTO_TEST_CASE(drain_reason_is_prefixed_and_bounded) {
  BOOST_TEST(DrainReason(Status::NotFound("x")) == "spank_jail: x");
  std::string r = DrainReason(Status::NotFound(std::string(1000, 'y')));
  BOOST_TEST(r.size() == 240u);
  BOOST_TEST(r.starts_with("spank_jail: "));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
