// A temporary directory for one test, removed with everything in it.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <boost/test/unit_test.hpp>

namespace k8sbridge::jail::testing {

class TestDir {
 public:
  TestDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "k8sbridge-jail-test-XXXXXX");
    char* made = ::mkdtemp(tmpl.data());
    path_ = made ? made : "";
  }
  ~TestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (ec && !path_.empty()) {
      // remove_all keeps a descriptor per level: a tree deeper than the
      // descriptor limit (as the deep-tree tests make) needs rm.
      std::string cmd = "rm -rf --one-file-system -- '" + path_ + "'";
      int rc = std::system(cmd.c_str());
      (void)rc;
    }
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// The tests that mount need root; elsewhere they say so and pass.
inline bool SkipUnlessRoot() {
  if (::geteuid() == 0)
    return false;
  BOOST_TEST_MESSAGE("skipped: needs root");
  return true;
}

// Moves the calling (forked, throw-away) process into a mount namespace of its
// own whose mounts propagate nowhere: nothing it mounts can reach the host.
inline bool PrivateMountNamespace() {
  return ::unshare(CLONE_NEWNS) == 0 &&
         ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
}

}  // namespace k8sbridge::jail::testing
