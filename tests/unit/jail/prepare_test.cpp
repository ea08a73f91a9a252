#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/enter.h"
#include "k8sbridge/jail/job_ns.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/jail/prepare.h"
#include "test_dir.h"

namespace k8sbridge::jail {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : std::string();
}

Result<PrepareConfig> Parse(std::vector<std::string> args, bool* undo) {
  return ParsePrepareArgs(args, undo);
}

using Fail = std::function<void(const std::string&)>;

// Runs `body` in a forked child, which may change its mount namespace freely,
// and returns what it reported through `fail` ("" when it finished).
std::string InChild(const std::function<void(const Fail&)>& body) {
  int fds[2];
  if (::pipe(fds) != 0)
    return "pipe";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Fail fail = [&](const std::string& why) {
      ssize_t n = ::write(fds[1], why.data(), why.size());
      (void)n;
      ::_exit(1);
    };
    body(fail);
    ::_exit(0);
  }
  ::close(fds[1]);
  char buf[512] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return "";
  std::string why(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return why.empty() ? "child ended with status " + std::to_string(status) : why;
}

BOOST_AUTO_TEST_SUITE(jail_prepare)

BOOST_AUTO_TEST_CASE(arguments) {
  bool undo = true;
  auto c = Parse({"--jail", "/srv/jail/", "--slurm-prefix", "/opt/slurm", "--gpu-lib",
                  "/usr/lib/libcuda.so.1", "--bind", "/scratch,/a:/b:ro", "--lock-timeout", "7"},
                 &undo);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(!undo);
  BOOST_TEST(c->jail == "/srv/jail");
  BOOST_TEST(c->slurm_prefix == "/opt/slurm");
  BOOST_TEST(c->state_file == "/run/k8sbridge/jail-prepare/_srv_jail");
  BOOST_TEST(c->lock_timeout.count() == 7000);
  BOOST_TEST(c->binds.size() == 2u);
  BOOST_TEST(Parse({"--jail", "/j", "--undo"}, &undo).ok());
  BOOST_TEST(undo);

  auto missing = Parse({"--slurm-prefix", "/x"}, &undo);
  BOOST_TEST(missing.status().message().find("--jail DIR is required") != std::string::npos);
  auto unknown = Parse({"--jail", "/j", "--frobnicate"}, &undo);
  BOOST_TEST(unknown.status().message().find("unknown argument '--frobnicate'") !=
             std::string::npos);
  auto novalue = Parse({"--jail"}, &undo);
  BOOST_TEST(novalue.status().message().find("--jail needs a value") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(plan_binds_the_standard_pieces_at_the_same_paths) {
  PrepareConfig c;
  c.jail = "/srv/jail";
  c.slurm_prefix = "/opt/slurm";
  c.gpu_libs = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1"};
  c.binds = {Bind{"/home", "/home", false}};
  auto plan = BuildPreparePlan(c);
  std::vector<std::string> targets;
  for (const auto& m : plan)
    targets.push_back(m.bind.target);
  std::vector<std::string> want = {
      "/dev",       "/sys",       "/etc/hosts", "/etc/resolv.conf",
      "/run/munge", "/opt/slurm", "/etc/slurm", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
      "/home"};
  BOOST_TEST(targets == want, boost::test_tools::per_element());
  BOOST_TEST(plan[0].recursive);  // GPU device nodes and devpts come along
  BOOST_TEST(plan[5].bind.read_only);
  BOOST_TEST(plan[7].bind.read_only);
  BOOST_TEST(plan[4].optional);
  BOOST_TEST(!plan[5].optional);
}

// Root only: prepares a tiny jail and enters it in a child process that first
// gets its own mount namespace, so nothing here can touch the host's mounts.
BOOST_AUTO_TEST_CASE(prepare_and_enter_a_jail_as_root) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: needs root");
    return;
  }
  testing::TestDir d;
  std::string jail = d / "jail";
  std::string data = d / "data";
  std::string tmp = d / "jobtmp";
  for (const char* sub : {"etc", "proc", "tmp", "srv", "dev"})
    fs::create_directories(jail + "/" + sub);
  fs::create_directories(data);
  fs::create_directories(tmp);
  ::chmod(jail.c_str(), 0755);
  ::chmod(d.path().c_str(), 0755);
  std::ofstream(jail + "/etc/os-release") << "ID=testjail\n";
  std::ofstream(data + "/hello") << "from the host\n";
  std::ofstream(tmp + "/mine") << "job tmp\n";

  std::string failure = InChild([&](const Fail& fail) {
    if (::unshare(CLONE_NEWNS) != 0)
      fail("unshare");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      fail("private");
    PrepareConfig c;
    c.jail = jail;
    c.standard = false;
    c.munge_dir = "";
    c.slurm_conf_dir = "";
    c.binds = {Bind{data, "/srv/data", true}};
    c.state_file = d / "state";
    NullLogger log;
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare: " + s.ToString());
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare again: " + s.ToString());
    Options o;
    o.jail = jail;
    o.binds = {Bind{data, "/tmp/deep/data", false}};
    TaskPlan plan = BuildTaskPlan(o, tmp);
    if (Status s = EnterJail(plan); !s.ok())
      fail("enter: " + s.ToString());
    auto os = ReadFile("/etc/os-release");
    if (!os.ok() || *os != "ID=testjail\n")
      fail("os-release: " + os.status().ToString());
    if (Slurp("/srv/data/hello") != "from the host\n")
      fail("bind");
    if (Slurp("/tmp/mine") != "job tmp\n")
      fail("tmp");
    if (Slurp("/tmp/deep/data/hello") != "from the host\n")
      fail("deep");
    if (::access("/proc/self/status", R_OK) != 0)
      fail("proc");
    if (::access((data + "/hello").c_str(), F_OK) == 0)
      fail("host still visible");
    std::ofstream probe("/srv/data/new");
    if (probe.good())
      fail("read-only bind is writable");
  });
  BOOST_TEST(failure.empty(), failure);
  BOOST_TEST(fs::exists(tmp + "/deep/data"));  // mount point made in the job's tmp
}

// Polls `ask` until `done` says yes about its result, for at most 30 s.
template <typename Ask, typename Done>
auto PollFor(Ask ask, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto r = ask();
  while (!done(r) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r = ask();
  }
  return r;
}

// Root only. A stand-in for the extern step's slurmstepd (a child in a
// private mount namespace of its own) starts the job's namespace; a task
// forked from it opens it, joins, and finds the jail as its root with the
// job's /tmp. The holder keeps probing: a missing probe file and a hung one (a
// FIFO without a writer) fail the open once the last good probe is older than
// kFresh. When the stand-in exits the holders die with it and there is no
// namespace to open.
BOOST_AUTO_TEST_CASE(job_namespace_is_joined_by_tasks_and_dies_with_the_extern_step) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: needs root");
    return;
  }
  testing::TestDir d;
  std::string jail = d / "jail";
  std::string tmp = d / "jobtmp";
  for (const char* sub : {"etc", "proc", "tmp"})
    fs::create_directories(jail + "/" + sub);
  fs::create_directories(tmp);
  ::chmod(jail.c_str(), 0755);
  ::chmod(d.path().c_str(), 0755);
  std::ofstream(jail + "/etc/os-release") << "ID=testjail\n";
  std::ofstream(jail + "/etc/hang") << "not yet\n";
  std::ofstream(tmp + "/mine") << "job tmp\n";
  JobNamespacePaths paths{d / "job7.sock", d / "job7.ns"};
  JobNamespacePaths hung_paths{d / "job8.sock", d / "job8.ns"};
  const auto kWait = std::chrono::seconds(5);

  std::string failure = InChild([&](const Fail& fail) {
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      fail("private mount namespace");
    Options o;
    o.jail = jail;
    Status refused =
        StartJobNamespace(BuildTaskPlan(o, d / "no-such-tmp"), "etc/os-release", paths, kWait);
    if (refused.ok() || refused.message().find("no-such-tmp") == std::string::npos)
      fail("a plan that cannot be carried out: " + refused.ToString());
    if (::access(paths.socket.c_str(), F_OK) == 0 || ::access(paths.state.c_str(), F_OK) == 0)
      fail("files left by a failed start");
    if (Status s = StartJobNamespace(BuildTaskPlan(o, tmp), "etc/os-release", paths, kWait);
        !s.ok())
      fail("start: " + s.ToString());
    auto open = [&] { return OpenJobNamespace(paths, jail, "etc/os-release", kWait); };
    pid_t task = ::fork();
    if (task == 0) {
      auto ns = open();
      if (!ns.ok() || !JoinJobNamespace(ns->get()).ok())
        ::_exit(2);
      bool in_jail =
          Slurp("/etc/os-release") == "ID=testjail\n" && Slurp("/tmp/mine") == "job tmp\n" &&
          ::access("/proc/self/status", R_OK) == 0 && ::access(paths.state.c_str(), F_OK) != 0;
      ::_exit(in_jail ? 0 : 3);
    }
    int status = 0;
    ::waitpid(task, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("task: status " + std::to_string(status));

    // The jail as the job sees it loses its probe file.
    fs::rename(jail + "/etc/os-release", jail + "/etc/os-release.away");
    auto missing = PollFor(open, [](const auto& r) { return !r.ok(); });
    fs::rename(jail + "/etc/os-release.away", jail + "/etc/os-release");
    if (missing.status().code() != Status::Code::kNotFound ||
        missing.status().message().find("looks unmounted or empty") == std::string::npos)
      fail("missing probe file: " + missing.status().ToString());
    if (!PollFor(open, [](const auto& r) { return r.ok(); }).ok())
      fail("the probe file is back");
    // While its probes succeed, steps need no answer from the holder: the
    // fresh state file is enough.
    ::unlink(paths.socket.c_str());
    if (!open().ok())
      fail("fast path: " + open().status().ToString());

    // A holder whose probe hangs: the step gives up at its deadline.
    if (Status s = StartJobNamespace(BuildTaskPlan(o, tmp), "etc/hang", hung_paths, kWait); !s.ok())
      fail("start the second: " + s.ToString());
    std::string fifo = jail + "/etc/hang.fifo";
    if (::mkfifo(fifo.c_str(), 0600) != 0)
      fail("mkfifo");
    fs::rename(fifo, jail + "/etc/hang");
    auto hung = PollFor(
        [&] {
          return OpenJobNamespace(hung_paths, jail, "etc/hang", std::chrono::milliseconds(300));
        },
        [](const auto& r) { return !r.ok(); });
    int writer = ::open((jail + "/etc/hang").c_str(), O_WRONLY | O_NONBLOCK);  // let it go
    if (writer >= 0)
      ::close(writer);
    if (hung.status().code() != Status::Code::kTimeout ||
        hung.status().message().find("did not answer within 300 ms") == std::string::npos)
      fail("hung probe: " + hung.status().ToString());
  });
  BOOST_REQUIRE_MESSAGE(failure.empty(), failure);

  // The holders went with the stand-in: there is no namespace to open.
  auto gone = PollFor([&] { return OpenJobNamespace(paths, jail, "etc/os-release", kWait); },
                      [](const auto& r) { return !r.ok(); });
  BOOST_TEST((gone.status().code() == Status::Code::kUnavailable), gone.status().ToString());
  BOOST_TEST(RemoveJobNamespace(paths).ok());
  BOOST_TEST(!fs::exists(paths.socket));
  BOOST_TEST(!fs::exists(paths.state));
  BOOST_TEST(RemoveJobNamespace(paths).ok());  // missing files are done
}

BOOST_AUTO_TEST_CASE(no_holder_means_no_job_namespace) {
  testing::TestDir d;
  auto none = OpenJobNamespace({d / "job1.sock", d / "job1.ns"}, "/srv/jail", "etc/os-release",
                               std::chrono::seconds(1));
  BOOST_TEST((none.status().code() == Status::Code::kUnavailable), none.status().ToString());
  auto no_dir = OpenJobNamespace({d / "w-9/job1.sock", d / "w-9/job1.ns"}, "/srv/jail",
                                 "etc/os-release", std::chrono::seconds(1));
  BOOST_TEST((no_dir.status().code() == Status::Code::kUnavailable), no_dir.status().ToString());
  // A fresh state file that names a live process with another start time (a
  // reused pid) is not trusted.
  std::ofstream(d / "job2.ns") << ::getpid() << " 1\n";
  auto reused = OpenJobNamespace({d / "job2.sock", d / "job2.ns"}, "/srv/jail", "etc/os-release",
                                 std::chrono::seconds(1));
  BOOST_TEST((reused.status().code() == Status::Code::kUnavailable), reused.status().ToString());
  auto p = JobNamespacePathsFor("/var/lib/jt", "w-0", 42);
  BOOST_TEST(p.socket == "/var/lib/jt/w-0/job42.sock");
  BOOST_TEST(p.state == "/var/lib/jt/w-0/job42.ns");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
