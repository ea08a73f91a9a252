#include <sched.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/probe.h"
#include "test_dir.h"

namespace k8sbridge::jail {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(jail_probe)

BOOST_AUTO_TEST_CASE(healthy_jail_answers) {
  testing::TestDir d;
  fs::create_directories(d / "etc");
  std::ofstream(d / "etc/os-release") << "ID=debian\n";
  BOOST_TEST(ProbeJail(d.path(), "etc/os-release", 5s).ok());
}

BOOST_AUTO_TEST_CASE(unmounted_jail_is_an_empty_directory) {
  testing::TestDir d;
  Status s = ProbeJail(d.path(), "etc/os-release", 5s);
  BOOST_TEST((s.code() == Status::Code::kNotFound));
  BOOST_TEST(s.message().find("looks unmounted or empty") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(missing_jail) {
  testing::TestDir d;
  Status s = ProbeJail(d / "gone", "etc/os-release", 5s);
  BOOST_TEST((s.code() == Status::Code::kNotFound));
  BOOST_TEST(s.message().find("is missing") != std::string::npos, s.message());
}

// A probe file that never answers: a FIFO with no writer blocks open(2) the way
// a hung NFS server blocks every access. The probe must give up at its deadline.
BOOST_AUTO_TEST_CASE(hung_jail_times_out_instead_of_hanging) {
  testing::TestDir d;
  fs::create_directories(d / "etc");
  BOOST_REQUIRE(::mkfifo((d / "etc/os-release").c_str(), 0644) == 0);
  Status s = ProbeJail(d.path(), "etc/os-release", 200ms);
  BOOST_TEST((s.code() == Status::Code::kTimeout));
  BOOST_TEST(s.message().find("did not answer within 200 ms") != std::string::npos, s.message());
  // Unblock the orphaned prober so it does not outlive the test.
  std::ofstream(d / "etc/os-release") << "x";
}

// The prober is created on the caller's CPU by narrowing the caller's affinity
// around clone(); slurmstepd forks the user's tasks later, so the caller must get
// its own affinity back exactly, whatever it was.
BOOST_AUTO_TEST_CASE(caller_cpu_affinity_is_left_as_it_was) {
  testing::TestDir d;
  fs::create_directories(d / "etc");
  std::ofstream(d / "etc/os-release") << "ID=debian\n";
  cpu_set_t original;
  BOOST_REQUIRE(::sched_getaffinity(0, sizeof original, &original) == 0);

  std::vector<cpu_set_t> masks{original};
  if (CPU_COUNT(&original) > 1) {
    // Two CPUs, the probe starting on either: restoring must not keep just one.
    cpu_set_t two;
    CPU_ZERO(&two);
    for (int cpu = 0, n = 0; cpu < CPU_SETSIZE && n < 2; ++cpu) {
      if (CPU_ISSET(cpu, &original)) {
        CPU_SET(cpu, &two);
        ++n;
      }
    }
    masks.push_back(two);
  }
  for (const cpu_set_t& mask : masks) {
    BOOST_REQUIRE(::sched_setaffinity(0, sizeof mask, &mask) == 0);
    for (int i = 0; i < 20; ++i) {
      BOOST_TEST(ProbeJail(d.path(), "etc/os-release", 5s).ok());
      cpu_set_t after;
      BOOST_REQUIRE(::sched_getaffinity(0, sizeof after, &after) == 0);
      BOOST_TEST(CPU_EQUAL(&after, &mask));
    }
  }
  BOOST_REQUIRE(::sched_setaffinity(0, sizeof original, &original) == 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
