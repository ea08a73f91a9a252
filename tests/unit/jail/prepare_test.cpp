#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/enter.h"
#include "k8sbridge/jail/gpu_driver.h"
#include "k8sbridge/jail/job_ns.h"
#include "k8sbridge/jail/job_tmp.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/jail/prepare.h"
#include "k8sbridge/jail/step.h"
#include "recording_logger.h"
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

// A preparation of `jail` with nothing but `binds` (no /dev, /sys, munge or Slurm).
PrepareConfig OnlyBinds(const std::string& jail, std::vector<Bind> binds,
                        const std::string& state_file) {
  PrepareConfig c;
  c.jail = jail;
  c.standard = false;
  c.munge_dir = "";
  c.slurm_conf_dir = "";
  c.binds = std::move(binds);
  c.state_file = state_file;
  return c;
}

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
  if (testing::SkipUnlessRoot())
    return;
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
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    PrepareConfig c = OnlyBinds(jail, {Bind{data, "/srv/data", true}}, d / "state");
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

// Root only. A mount already under the jail that this pod's earlier run did not
// make (another pod's bind, leaked through mount propagation) is refused, not
// reused; the pod's own earlier mounts still are.
BOOST_AUTO_TEST_CASE(a_mount_someone_else_made_in_the_jail_is_refused) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = d / "jail";
  std::string data = d / "data";
  for (const char* sub : {"etc", "srv/data"})
    fs::create_directories(jail + "/" + sub);
  fs::create_directories(data);
  ::chmod(jail.c_str(), 0755);
  ::chmod(d.path().c_str(), 0755);
  std::ofstream(jail + "/etc/os-release") << "ID=testjail\n";
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    // "Another pod's" mount on the target, before this pod prepares the jail.
    std::string target = jail + "/srv/data";
    if (::mount("tmpfs", target.c_str(), "tmpfs", 0, "size=1m") != 0)
      fail("tmpfs");
    PrepareConfig c = OnlyBinds(jail, {Bind{data, "/srv/data", true}}, d / "state");
    NullLogger log;
    Status s = PrepareJail(c, log);
    if (s.ok() || s.message().find("not one this pod's") == std::string::npos ||
        s.message().find(target) == std::string::npos)
      fail("a foreign mount was reused: " + s.ToString());
    if (::umount2(target.c_str(), MNT_DETACH) != 0)
      fail("umount");
    if (Status again = PrepareJail(c, log); !again.ok())
      fail("prepare: " + again.ToString());
    if (Status again = PrepareJail(c, log); !again.ok())
      fail("prepare again (its own mount): " + again.ToString());
  });
  BOOST_TEST(failure.empty(), failure);
}

// A small jail (etc/os-release, proc, tmp, srv, var/tmp, dev/shm) under `d`,
// root-owned and mode 0755 like a real one.
std::string MakeTestJail(const testing::TestDir& d) {
  std::string jail = d / "jail";
  for (const char* sub : {"etc", "proc", "tmp", "srv", "var/tmp", "dev/shm"})
    fs::create_directories(jail + "/" + sub);
  ::chmod(jail.c_str(), 0755);
  ::chmod(d.path().c_str(), 0755);
  std::ofstream(jail + "/etc/os-release") << "ID=testjail\n";
  return jail;
}

bool Writable(const std::string& dir) {
  std::string path = dir + "/probe-write";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  ::close(fd);
  ::unlink(path.c_str());
  return true;
}

// Root only. A read-only bind takes its submounts along read-only too, both
// from the pod-level preparation and from a task's own binds.
BOOST_AUTO_TEST_CASE(read_only_binds_are_read_only_in_their_submounts) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  fs::create_directories(jail + "/srv/task");
  std::string data = d / "data";
  fs::create_directories(data + "/sub");
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    if (::mount("tmpfs", (data + "/sub").c_str(), "tmpfs", 0, nullptr) != 0)
      fail("tmpfs submount");
    PrepareConfig c = OnlyBinds(jail, {Bind{data, "/srv/pod", true}}, d / "state");
    NullLogger log;
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare: " + s.ToString());
    if (Writable(jail + "/srv/pod") || Writable(jail + "/srv/pod/sub"))
      fail("the pod-level read-only bind has a writable submount");
    Options o;
    o.jail = jail;
    o.tmp = TmpMode::kJail;
    o.binds = {Bind{data, "/srv/task", true}};
    if (Status s = EnterJail(BuildTaskPlan(o, "")); !s.ok())
      fail("enter: " + s.ToString());
    if (Writable("/srv/task") || Writable("/srv/task/sub"))
      fail("the task's read-only bind has a writable submount");
    if (!Writable("/tmp"))
      fail("/tmp should stay writable");
  });
  BOOST_TEST(failure.empty(), failure);
}

// Root only. A bind source that is a symlink, has one in its path, or goes
// through a /proc magic link could be swapped by whoever owns the link: refused.
BOOST_AUTO_TEST_CASE(bind_sources_through_symlinks_or_magic_links_are_refused) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  fs::create_directories(d / "real");
  fs::create_directory_symlink(d / "real", d / "swapped");
  std::string magic = "/proc/" + std::to_string(::getpid()) + "/root" + d / "real";
  for (const std::string& source : {d / "swapped", magic}) {
    std::string failure = InChild([&](const Fail& fail) {
      if (!testing::PrivateMountNamespace())
        fail("private mount namespace");
      Options o;
      o.jail = jail;
      o.tmp = TmpMode::kJail;
      o.binds = {Bind{source, "/srv", false}};
      Status s = EnterJail(BuildTaskPlan(o, ""));
      if (s.ok() ||
          s.message().find("bind source " + source + " is a symlink") == std::string::npos)
        fail("not refused: " + s.ToString());
    });
    BOOST_TEST(failure.empty(), source << ": " << failure);
  }
}

// Root only. Each job gets its own /var/tmp (a directory next to its /tmp,
// removed with it) and its own /dev/shm (a tmpfs of its namespace).
BOOST_AUTO_TEST_CASE(each_job_has_its_own_var_tmp_and_dev_shm) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  std::string base = d / "tmpbase";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 11).ok());
  std::string job_tmp = JobTmpPath(base, "w-0", 11);
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    Options o;
    o.jail = jail;
    if (Status s = EnterJail(BuildTaskPlan(o, job_tmp)); !s.ok())
      fail("enter: " + s.ToString());
    struct statfs fs_info {};
    if (::statfs("/dev/shm", &fs_info) != 0 || fs_info.f_type != TMPFS_MAGIC)
      fail("/dev/shm is not a tmpfs of the job's own");
    std::ofstream("/dev/shm/segment") << "x";
    std::ofstream("/var/tmp/kept") << "x";
    if (!fs::exists("/dev/shm/segment") || !fs::exists("/var/tmp/kept"))
      fail("cannot write the job's /dev/shm or /var/tmp");
  });
  BOOST_TEST(failure.empty(), failure);
  BOOST_TEST(fs::exists(JobVarTmpPath(job_tmp) + "/kept"));
  BOOST_TEST(!fs::exists(jail + "/var/tmp/kept"));     // not the jail's shared /var/tmp
  BOOST_TEST(!fs::exists(jail + "/dev/shm/segment"));  // gone with the namespace
  BOOST_TEST(RemoveJobTmp(base, "w-0", 11).ok());
  BOOST_TEST(!fs::exists(JobVarTmpPath(job_tmp)));
}

// Root only. --undo unmounts what it recorded, never what a recorded path
// has since become a symlink to.
BOOST_AUTO_TEST_CASE(undo_follows_no_symlink) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string real = d / "real";
  fs::create_directories(real);
  fs::create_directory_symlink(real, d / "was-a-mount");
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    if (::mount("tmpfs", real.c_str(), "tmpfs", 0, nullptr) != 0)
      fail("tmpfs");
    PrepareConfig c;
    c.jail = d / "jail";
    c.state_file = d / "state";
    std::ofstream(c.state_file) << d / "was-a-mount"
                                << "\n";
    NullLogger log;
    (void)UndoPrepare(c, log);
    auto points = MountPoints();
    if (!points.ok() || std::find(points->begin(), points->end(), real) == points->end())
      fail("undo unmounted " + real + " through a symlink");
  });
  BOOST_TEST(failure.empty(), failure);
}

// Root only. The job namespace's state file and socket are trusted only when
// they are root's own: planted ones are refused, with a message that says so.
BOOST_AUTO_TEST_CASE(planted_job_namespace_files_are_refused) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  constexpr uid_t kUser = 4242;
  std::string state = d / "job3.ns";
  std::ofstream(state) << ::getpid() << " 1\n";
  BOOST_REQUIRE(::chown(state.c_str(), kUser, kUser) == 0);
  auto planted = OpenJobNamespace({d / "job3.sock", state}, "/srv/jail", "etc/os-release",
                                  std::chrono::seconds(1));
  BOOST_TEST((planted.status().code() == Status::Code::kPermissionDenied),
             planted.status().ToString());
  BOOST_TEST(planted.status().message().find("is not the one spank_jail made") !=
             std::string::npos);

  std::string sock_path = d / "job4.sock";
  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path.c_str());
  BOOST_REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(sock.get(), 4) == 0);
  BOOST_REQUIRE(::chown(sock_path.c_str(), kUser, kUser) == 0);
  auto socket_planted = OpenJobNamespace({sock_path, d / "job4.ns"}, "/srv/jail", "etc/os-release",
                                         std::chrono::seconds(1));
  BOOST_TEST((socket_planted.status().code() == Status::Code::kPermissionDenied),
             socket_planted.status().ToString());
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
  if (testing::SkipUnlessRoot())
    return;
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
    if (!testing::PrivateMountNamespace())
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

// The mount options of each line of /proc/self/mountinfo, by mount point:
// "<per-mount options> <super options>".
std::vector<std::pair<std::string, std::string>> MountOptions() {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(Slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(f), {}};
    auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 6 || dash == w.end() || w.end() - dash < 4)
      continue;
    out.emplace_back(w[4], w[5] + " " + *(dash + 3));
  }
  return out;
}

bool HasOption(const std::string& options, const std::string& want) {
  std::string padded = "," + options;
  std::replace(padded.begin(), padded.end(), ' ', ',');
  return (padded + ",").find("," + want + ",") != std::string::npos;
}

// Checks, inside an entered view, what every task must get whatever the view.
void CheckSealedView(const Fail& fail) {
  for (const auto& [point, options] : MountOptions()) {
    if (!HasOption(options, "nosuid"))
      fail(point + " is not nosuid: " + options);
    if (point == "/" && !HasOption(options, "ro"))
      fail("the jail's root is writable: " + options);
    if (point == "/proc" && !HasOption(options, "hidepid=invisible"))
      fail("/proc has no hidepid=invisible: " + options);
  }
  if (Writable("/etc"))
    fail("the jail's /etc is writable");
  if (!Writable("/tmp") || !Writable("/var/tmp") || !Writable("/dev/shm"))
    fail("the job's /tmp, /var/tmp or /dev/shm is not writable");
  struct stat st {};
  if (::stat("/dev/termination-log", &st) != 0 || !S_ISCHR(st.st_mode))
    fail("/dev/termination-log is not masked with /dev/null");
  std::ofstream("/dev/termination-log") << "forged by a job";
  if (Slurp("/etc/slurm/slurm.conf") != "ClusterName=cached\n")
    fail("the conf-cache is not at /etc/slurm");
  if (Writable("/etc/slurm"))
    fail("/etc/slurm is writable");
}

// Root only. Every view, per task and the job's namespace: all of its mounts
// nosuid, the jail's own root read-only (the job's /tmp, /var/tmp and /dev/shm
// still writable), /proc with hidepid=invisible, /dev/termination-log masked,
// and a configless node's conf-cache read-only at /etc/slurm.
BOOST_AUTO_TEST_CASE(a_view_is_sealed_whoever_builds_it) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  fs::create_directories(jail + "/etc/slurm");
  std::ofstream(jail + "/dev/termination-log") << "";
  ::chmod((jail + "/dev/termination-log").c_str(), 0666);
  std::string cache = d / "spool/conf-cache";
  fs::create_directories(cache);
  std::ofstream(cache + "/slurm.conf") << "ClusterName=cached\n";
  std::string base = d / "tmpbase";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 12).ok());
  for (ViewFor view : {ViewFor::kTask, ViewFor::kJobNamespace}) {
    std::string failure = InChild([&](const Fail& fail) {
      if (!testing::PrivateMountNamespace())
        fail("private mount namespace");
      Options o;
      o.jail = jail;
      o.tmp_size = "1m";
      TaskPlan plan = BuildTaskPlan(o, JobTmpPath(base, "w-0", 12), cache + "/slurm.conf", view);
      if (Status s = EnterJail(plan); !s.ok())
        fail("enter: " + s.ToString());
      CheckSealedView(fail);
      struct statfs tmp {};
      bool tmpfs = ::statfs("/tmp", &tmp) == 0 && tmp.f_type == TMPFS_MAGIC;
      if (tmpfs != (view == ViewFor::kJobNamespace))
        fail("/tmp is a tmpfs only in the job namespace");
      if (tmpfs && tmp.f_blocks * tmp.f_bsize != 1024 * 1024)
        fail("/tmp is not a tmpfs of tmp_size");
    });
    BOOST_TEST(failure.empty(), failure);
  }
  BOOST_TEST(Slurp(jail + "/dev/termination-log").empty());
}

// A jail without /etc/slurm cannot show tasks a configless node's conf-cache:
// the step's checks catch it (and drain), before any task fails on it.
BOOST_AUTO_TEST_CASE(a_conf_cache_needs_etc_slurm_in_the_jail) {
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  std::string cache = d / "conf-cache";
  fs::create_directories(cache);
  Options o;
  o.jail = jail;
  o.tmp = TmpMode::kJail;
  RealJailSystem sys(nullptr, Status::Unavailable("no Slurm"));
  Status s = sys.CheckBinds(BuildTaskPlan(o, "", cache + "/slurm.conf"));
  BOOST_TEST(s.message().find("/etc/slurm") != std::string::npos, s.ToString());
  fs::create_directories(jail + "/etc/slurm");
  BOOST_TEST(sys.CheckBinds(BuildTaskPlan(o, "", cache + "/slurm.conf")).ok());
}

// Not root: the task execs with no_new_privs (no setuid program gains
// anything), and with the SLURM_CONF it finds in the jail.
BOOST_AUTO_TEST_CASE(a_sealed_task_gains_no_privileges_and_finds_its_slurm_conf) {
  std::string failure = InChild([&](const Fail& fail) {
    if (Status s = SealTask("/etc/slurm/slurm.conf"); !s.ok())
      fail("seal: " + s.ToString());
    if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
      fail("no_new_privs is not set");
    const char* conf = std::getenv("SLURM_CONF");
    if (conf == nullptr || std::string(conf) != "/etc/slurm/slurm.conf")
      fail("SLURM_CONF is not the jail's");
    ::setenv("SLURM_CONF", "/keep", 1);
    if (Status s = SealTask(""); !s.ok() || std::string(std::getenv("SLURM_CONF")) != "/keep")
      fail("an empty task_conf changed SLURM_CONF");
  });
  BOOST_TEST(failure.empty(), failure);
}

// Root only. Workers mount the jail read-only: the preparation binds onto the
// mount points the jail has without writing to it (no lock file), and a missing
// one fails with what to do.
BOOST_AUTO_TEST_CASE(a_read_only_jail_is_prepared_without_writing_to_it) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  std::string data = d / "data";
  fs::create_directories(data);
  std::ofstream(data + "/hello") << "from the pod\n";
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    if (::mount(jail.c_str(), jail.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, jail.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      fail("make the jail read-only");
    NullLogger log;
    if (Status s = PrepareJail(OnlyBinds(jail, {Bind{data, "/srv", true}}, d / "state"), log);
        !s.ok())
      fail("prepare: " + s.ToString());
    if (Slurp(jail + "/srv/hello") != "from the pod\n")
      fail("bind");
    Status missing = PrepareJail(OnlyBinds(jail, {Bind{data, "/opt/x", true}}, d / "s2"), log);
    if (missing.message().find("the jail is mounted read-only here; create /opt in the jail "
                               "once") == std::string::npos)
      fail("missing mount point: " + missing.ToString());
  });
  BOOST_TEST(failure.empty(), failure);
  BOOST_TEST(!fs::exists(jail + "/.k8sbridge-prepare.lock"));
}

// A GPU driver as the container runtime injects it: a file the jail lacks, in
// a directory ("container") the jail has. Returns the preparation that binds it.
PrepareConfig WithDriverFile(const testing::TestDir& d, const std::string& jail) {
  NullLogger log;
  std::string container = d / "container";
  fs::create_directories(container);
  fs::create_directories(jail + container);
  ::chmod((jail + container).c_str(), 0755);
  std::ofstream(container + "/libnvidia-ml.so.1") << "driver 550\n";
  PrepareConfig c = OnlyBinds(jail, {}, d / "state");
  AddGpuDriverFiles(c, {container}, log);
  return c;
}

std::vector<std::string> MountsBelow(const std::string& dir) {
  std::vector<std::string> below;
  auto points = MountPoints();
  for (const std::string& point : points.ok() ? *points : std::vector<std::string>{}) {
    if (point.starts_with(dir + "/"))
      below.push_back(point);
  }
  return below;
}

// Checks a read-only jail prepared with the driver file of WithDriverFile:
// the file is there, read-only, on a layer of the pod's, not on `disk` (the
// jail's own directory seen through another path).
void CheckDriverFileOnLayer(const testing::TestDir& d, const std::string& jail,
                            const std::string& disk, const Fail& fail) {
  std::string dir = jail + d / "container";
  std::string lib = dir + "/libnvidia-ml.so.1";
  if (Slurp(lib) != "driver 550\n")
    fail("the driver file is not in the jail");
  if (::open(lib.c_str(), O_WRONLY | O_CLOEXEC) >= 0 || errno != EROFS)
    fail("the driver file is writable in the jail");
  if (fs::exists(disk + d / "container/libnvidia-ml.so.1"))
    fail("the mount point was made in the jail on disk");
  if (Slurp(d / "state") != dir + "\n" + lib + "\n")
    fail("the state file does not list the layer before the file: " + Slurp(d / "state"));
  auto points = MountPoints();
  if (!points.ok() ||
      std::find(points->begin(), points->end(), d / "overlay-staging") != points->end())
    fail("the staging tmpfs is still attached");
}

// Root only. On a read-only jail a GPU driver file's mount point cannot be
// made: its jail directory gets a per-pod writable layer (overlayfs on tmpfs)
// that holds it. A second run changes nothing; --undo removes the bind, then
// the layer.
BOOST_AUTO_TEST_CASE(a_gpu_driver_file_gets_a_writable_layer_in_a_read_only_jail) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  std::string disk = d / "disk";
  fs::create_directories(disk);
  PrepareConfig c = WithDriverFile(d, jail);
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    if (::mount(jail.c_str(), disk.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(jail.c_str(), jail.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, jail.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      fail("make the jail read-only");
    RecordingLogger log;
    PrepareConfig odd = c;
    odd.state_file = d / "a,b/state";
    Status refused = PrepareJail(odd, log);
    if (refused.message().find(d / "a,b/overlay-staging") == std::string::npos ||
        !MountsBelow(jail).empty())
      fail("a staging path overlayfs cannot take: " + refused.ToString());
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare: " + s.ToString());
    if (!log.Contains("is read-only: a per-pod writable layer (overlayfs on tmpfs) holds the "
                      "GPU driver's mount points"))
      fail("the layer is not logged");
    CheckDriverFileOnLayer(d, jail, disk, fail);
    std::vector<std::string> before = MountsBelow(jail);
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare again: " + s.ToString());
    if (MountsBelow(jail) != before)
      fail("the second run changed the mounts");
    CheckDriverFileOnLayer(d, jail, disk, fail);
    if (Status s = UndoPrepare(c, log); !s.ok())
      fail("undo: " + s.ToString());
    if (!MountsBelow(jail).empty())
      fail("undo left mounts: " + MountsBelow(jail).front());
    if (fs::exists(jail + d / "container/libnvidia-ml.so.1"))
      fail("the driver file is still in the jail after undo");
  });
  BOOST_TEST(failure.empty(), failure);
}

// Root only. In a writable jail nothing changes: the driver file's mount point
// is made in the jail, and no layer is laid.
BOOST_AUTO_TEST_CASE(a_gpu_driver_file_in_a_writable_jail_gets_no_layer) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string jail = MakeTestJail(d);
  std::string lib = jail + d / "container/libnvidia-ml.so.1";
  PrepareConfig c = WithDriverFile(d, jail);
  std::string failure = InChild([&](const Fail& fail) {
    if (!testing::PrivateMountNamespace())
      fail("private mount namespace");
    NullLogger log;
    if (Status s = PrepareJail(c, log); !s.ok())
      fail("prepare: " + s.ToString());
    if (Slurp(lib) != "driver 550\n")
      fail("the driver file is not in the jail");
    if (MountsBelow(jail) != std::vector<std::string>{lib} || Slurp(d / "state") != lib + "\n")
      fail("more than the file's bind: " + Slurp(d / "state"));
  });
  BOOST_TEST(failure.empty(), failure);
  BOOST_TEST(fs::exists(lib));  // the mount point, in the jail itself
  BOOST_TEST(!fs::exists(d / "overlay-staging"));
}

// The shipped worker templates mount the jail read-only.
BOOST_AUTO_TEST_CASE(workers_mount_the_jail_read_only) {
  const std::string root = K8SBRIDGE_SOURCE_ROOT;
  for (const char* dir : {"deploy/base", "deploy/overlays/demo", "deploy/overlays/example-gpu"}) {
    std::string path = root + "/" + dir + "/config/worker-pod.yaml";
    std::istringstream lines(Slurp(path));
    int mounts = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.find("{name: jail,") == std::string::npos ||
          line.find("mountPath:") == std::string::npos)
        continue;
      ++mounts;
      BOOST_TEST(line.find("readOnly: true") != std::string::npos, path << ": " << line);
    }
    BOOST_TEST(mounts == 1, path);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
