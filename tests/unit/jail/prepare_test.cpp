#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/enter.h"
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

  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto fail = [&](const std::string& why) {
      ssize_t n = ::write(fds[1], why.data(), why.size());
      (void)n;
      ::_exit(1);
    };
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
    ::_exit(0);
  }
  ::close(fds[1]);
  char buf[512] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0, std::string(buf, n > 0 ? n : 0));
  BOOST_TEST(fs::exists(tmp + "/deep/data"));  // mount point made in the job's tmp
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
