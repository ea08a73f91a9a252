#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/job_tmp.h"
#include "test_dir.h"

namespace k8sbridge::jail {
namespace {

namespace fs = std::filesystem;

mode_t ModeOf(const std::string& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_mode & 07777;
}

BOOST_AUTO_TEST_SUITE(jail_job_tmp)

BOOST_AUTO_TEST_CASE(create_is_idempotent_with_private_parents) {
  testing::TestDir d;
  std::string base = d / "a/b/tmpbase";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 7, ::geteuid()).ok());
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 7, ::geteuid()).ok());
  BOOST_TEST(JobTmpPath(base, "w-0", 7) == base + "/w-0/job7");
  BOOST_TEST(ModeOf(base) == 0700u);
  BOOST_TEST(ModeOf(base + "/w-0") == 0700u);
  BOOST_TEST(ModeOf(base + "/w-0/job7") == 01777u);
  BOOST_TEST(ModeOf(base + "/w-0/job7.var-tmp") == 01777u);
  BOOST_TEST(JobVarTmpPath(JobTmpPath(base, "w-0", 7)) == base + "/w-0/job7.var-tmp");
  BOOST_TEST(!CreateJobTmp(base, "../x", 7, ::geteuid()).ok());
}

BOOST_AUTO_TEST_CASE(remove_takes_everything_but_follows_no_symlink) {
  testing::TestDir d;
  std::string base = d / "base";
  std::string keep = d / "keep";
  fs::create_directories(keep);
  std::ofstream(keep + "/precious") << "x";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 8, ::geteuid()).ok());
  std::string job = JobTmpPath(base, "w-0", 8);
  fs::create_directories(job + "/deep/er");
  std::ofstream(job + "/deep/er/f") << "x";
  fs::create_directory_symlink(keep, job + "/link-to-keep");
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 9, ::geteuid()).ok());

  BOOST_TEST(RemoveJobTmp(base, "w-0", 8, ::geteuid()).ok());
  BOOST_TEST(!fs::exists(job));
  BOOST_TEST(fs::exists(keep + "/precious"));
  BOOST_TEST(fs::exists(JobTmpPath(base, "w-0", 9)));          // another job's tmp stays
  BOOST_TEST(RemoveJobTmp(base, "w-0", 8, ::geteuid()).ok());  // already gone is fine
}

// Makes `depth` nested directories "d" below `top`, without paths (a path
// that deep is far beyond PATH_MAX), and returns a descriptor of the deepest.
int MakeDeepTree(const std::string& top, int depth) {
  int fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < depth && fd >= 0; ++i) {
    int next = ::mkdirat(fd, "d", 0755) == 0 ? ::openat(fd, "d", O_RDONLY | O_DIRECTORY) : -1;
    ::close(fd);
    fd = next;
  }
  return fd;
}

// A job may leave a tree far deeper than any recursion (or any number of
// open descriptors) can follow: the removal is iterative, and a symlink deep
// inside it is removed without its target being touched.
BOOST_AUTO_TEST_CASE(remove_takes_a_20000_level_tree_and_follows_no_symlink_in_it) {
  testing::TestDir d;
  std::string base = d / "base";
  std::string keep = d / "keep";
  fs::create_directories(keep + "/sub");
  std::ofstream(keep + "/sub/precious") << "x";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 5, ::geteuid()).ok());
  std::string job = JobTmpPath(base, "w-0", 5);
  int deepest = MakeDeepTree(job, 20000);
  BOOST_REQUIRE(deepest >= 0);
  BOOST_REQUIRE(::symlinkat(keep.c_str(), deepest, "link-to-keep") == 0);
  BOOST_REQUIRE(::symlinkat((keep + "/sub/precious").c_str(), deepest, "file-link") == 0);
  int f = ::openat(deepest, "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  BOOST_REQUIRE(f >= 0);
  ::close(f);
  ::close(deepest);
  int var_deep = MakeDeepTree(JobVarTmpPath(job), 3000);
  BOOST_REQUIRE(var_deep >= 0);
  ::close(var_deep);

  Status s = RemoveJobTmp(base, "w-0", 5, ::geteuid());
  BOOST_TEST(s.ok(), s.ToString());
  BOOST_TEST(!fs::exists(job));
  BOOST_TEST(!fs::exists(JobVarTmpPath(job)));
  BOOST_TEST(fs::exists(keep + "/sub/precious"));
  BOOST_TEST(fs::exists(base + "/w-0"));
}

// Root only: a file system mounted inside a job's tmp is left alone (and said
// so), everything else around it goes.
BOOST_AUTO_TEST_CASE(remove_stays_on_its_own_mount) {
  if (testing::SkipUnlessRoot())
    return;
  testing::TestDir d;
  std::string base = d / "base";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 6).ok());
  std::string job = JobTmpPath(base, "w-0", 6);
  fs::create_directories(job + "/a/mnt");
  std::ofstream(job + "/a/f") << "x";
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = testing::PrivateMountNamespace() &&
              ::mount("tmpfs", (job + "/a/mnt").c_str(), "tmpfs", 0, nullptr) == 0;
    std::ofstream(job + "/a/mnt/on-the-mount") << "x";
    Status s = RemoveJobTmp(base, "w-0", 6);
    ok =
        ok && !s.ok() && s.message().find("is a mount point: not removing it") != std::string::npos;
    ok = ok && fs::exists(job + "/a/mnt/on-the-mount") && !fs::exists(job + "/a/f");
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

// tmp_base holds the state files that hand tasks a namespace: it and every
// directory above it must be root's (or, here, the test's own uid's) and
// writable by nobody else; a sticky parent such as /tmp is fine.
BOOST_AUTO_TEST_CASE(tmp_base_and_its_parents_must_be_trusted) {
  testing::TestDir d;
  uid_t me = ::geteuid();
  std::string open_dir = d / "open";
  fs::create_directories(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  Status s = CreateJobTmp(open_dir + "/base", "w-0", 1, me);
  BOOST_TEST((s.code() == Status::Code::kPermissionDenied), s.ToString());
  BOOST_TEST(s.message().find("its parent " + open_dir + " is writable by others (mode 0777)") !=
                 std::string::npos,
             s.message());
  BOOST_TEST(s.message().find("spank_jail option tmp_base") != std::string::npos, s.message());

  std::string sticky = d / "sticky";
  fs::create_directories(sticky);
  ::chmod(sticky.c_str(), 01777);
  BOOST_TEST(CreateJobTmp(sticky + "/base", "w-0", 1, me).ok());

  std::string wide = d / "wide";
  fs::create_directories(wide);
  ::chmod(wide.c_str(), 0775);
  s = CreateJobTmp(wide, "w-0", 1, me);
  BOOST_TEST(s.message().find("spank_jail option tmp_base " + wide +
                              " is writable by its group (mode 0775)") != std::string::npos,
             s.message());

  fs::create_directories(d / "real");
  fs::create_directory_symlink(d / "real", d / "link");
  s = CreateJobTmp(d / "link/base", "w-0", 1, me);
  BOOST_TEST(s.message().find("is a symlink or not a directory") != std::string::npos, s.message());

  // A node directory not made by us, or opened up, is refused, also by the check a step makes.
  std::string base = d / "base";
  BOOST_REQUIRE(CreateNodeDir(base, "w-1", me).ok());
  BOOST_TEST(CheckNodeDir(base, "w-1", me).ok());
  BOOST_TEST((CheckNodeDir(base, "w-2", me).code() == Status::Code::kUnavailable));
  BOOST_TEST((CheckNodeDir(d / "nowhere", "w-1", me).code() == Status::Code::kUnavailable));
  ::chmod((base + "/w-1").c_str(), 0755);
  s = CheckNodeDir(base, "w-1", me);
  BOOST_TEST(s.message().find("is not a directory owned by uid") != std::string::npos, s.message());
}

// Root only: directories someone else owns are never adopted.
BOOST_AUTO_TEST_CASE(foreign_owned_tmp_base_node_or_job_directory_is_refused) {
  if (testing::SkipUnlessRoot())
    return;
  constexpr uid_t kUser = 4242;
  testing::TestDir d;
  std::string base = d / "base";
  fs::create_directories(base);
  ::chmod(base.c_str(), 0755);
  BOOST_REQUIRE(::chown(base.c_str(), kUser, kUser) == 0);
  Status s = CreateJobTmp(base, "w-0", 1);
  BOOST_TEST(s.message().find(base + " is owned by uid 4242, not 0") != std::string::npos,
             s.message());

  BOOST_REQUIRE(::chown(base.c_str(), 0, 0) == 0);
  fs::create_directories(base + "/w-0");
  BOOST_REQUIRE(::chown((base + "/w-0").c_str(), kUser, kUser) == 0);
  s = CreateJobTmp(base, "w-0", 1);
  BOOST_TEST(
      s.message().find("owned by uid 4242, not 0: someone else made it") != std::string::npos,
      s.message());
  BOOST_TEST((CheckNodeDir(base, "w-0").code() == Status::Code::kPermissionDenied));
  // The epilog removes nothing below a node directory it does not trust.
  BOOST_TEST(!RemoveJobTmp(base, "w-0", 1).ok());

  BOOST_REQUIRE(CreateNodeDir(base, "w-1").ok());
  fs::create_directories(base + "/w-1/job3");
  BOOST_REQUIRE(::chown((base + "/w-1/job3").c_str(), kUser, kUser) == 0);
  s = CreateJobTmp(base, "w-1", 3);
  BOOST_TEST(s.message().find("job3 is owned by uid 4242") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
