#include <sys/stat.h>

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
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 7).ok());
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 7).ok());
  BOOST_TEST(JobTmpPath(base, "w-0", 7) == base + "/w-0/job7");
  BOOST_TEST(ModeOf(base) == 0700u);
  BOOST_TEST(ModeOf(base + "/w-0") == 0700u);
  BOOST_TEST(ModeOf(base + "/w-0/job7") == 01777u);
  BOOST_TEST(!CreateJobTmp(base, "../x", 7).ok());
}

BOOST_AUTO_TEST_CASE(remove_takes_everything_but_follows_no_symlink) {
  testing::TestDir d;
  std::string base = d / "base";
  std::string keep = d / "keep";
  fs::create_directories(keep);
  std::ofstream(keep + "/precious") << "x";
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 8).ok());
  std::string job = JobTmpPath(base, "w-0", 8);
  fs::create_directories(job + "/deep/er");
  std::ofstream(job + "/deep/er/f") << "x";
  fs::create_directory_symlink(keep, job + "/link-to-keep");
  BOOST_REQUIRE(CreateJobTmp(base, "w-0", 9).ok());

  BOOST_TEST(RemoveJobTmp(base, "w-0", 8).ok());
  BOOST_TEST(!fs::exists(job));
  BOOST_TEST(fs::exists(keep + "/precious"));
  BOOST_TEST(fs::exists(JobTmpPath(base, "w-0", 9)));  // another job's tmp stays
  BOOST_TEST(RemoveJobTmp(base, "w-0", 8).ok());       // already gone is fine
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
