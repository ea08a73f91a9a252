#include "k8sbridge/power/counters.h"

#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

namespace power = k8sbridge::power;

namespace {

// A directory of its own, removed at the end.
struct ScratchDir {
  std::string path = std::filesystem::temp_directory_path() /
                     ("k8sbridge-power-counters-" + std::to_string(::getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string File() const { return path + "/counters"; }
};

power::CallOutcome Run(std::string subcommand, uint64_t ok, uint64_t failed, double seconds,
                       bool gave_up = false) {
  return {std::move(subcommand), ok, failed, gave_up, std::chrono::duration<double>(seconds)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(counters)

BOOST_AUTO_TEST_CASE(runs_add_up_by_subcommand_and_outcome) {
  ScratchDir dir;
  BOOST_REQUIRE(power::AddPowerCall(dir.File(), Run("resume", 4, 0, 1.5)).ok());
  BOOST_REQUIRE(power::AddPowerCall(dir.File(), Run("resume", 2, 1, 2.0)).ok());
  BOOST_REQUIRE(power::AddPowerCall(dir.File(), Run("resume", 0, 3, 0.25, true)).ok());
  BOOST_REQUIRE(power::AddPowerCall(dir.File(), Run("suspend", 3, 0, 0.5)).ok());
  auto read = power::ReadPowerCounters(dir.File());
  BOOST_REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  const power::CallTotals& resume = read->at("resume");
  BOOST_CHECK_EQUAL(resume.calls_ok, 1u);
  BOOST_CHECK_EQUAL(resume.calls_failed, 1u);
  BOOST_CHECK_EQUAL(resume.calls_error, 1u);
  BOOST_CHECK_EQUAL(resume.nodes_ok, 6u);
  BOOST_CHECK_EQUAL(resume.nodes_failed, 4u);
  BOOST_CHECK_CLOSE(resume.seconds, 3.75, 1e-9);
  BOOST_CHECK_EQUAL(read->at("suspend").Calls(), 1u);
  BOOST_CHECK_EQUAL(read->count("resume-fail"), 0u);
}

BOOST_AUTO_TEST_CASE(the_file_reads_back_what_was_written) {
  power::PowerCounters counters;
  counters["resume"] = {.calls_ok = 3,
                        .calls_failed = 1,
                        .calls_error = 0,
                        .nodes_ok = 12,
                        .nodes_failed = 2,
                        .seconds = 8.5};
  const std::string text = power::FormatPowerCounters(counters);
  BOOST_CHECK_EQUAL(text,
                    "# k8sbridge-power counters 1\n"
                    "resume calls_ok=3 calls_failed=1 calls_error=0 nodes_ok=12 nodes_failed=2 "
                    "seconds=8.5\n");
  auto parsed = power::ParsePowerCounters(text);
  BOOST_REQUIRE(parsed.ok());
  BOOST_CHECK(*parsed == counters);
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_no_counts_and_a_broken_one_names_its_line) {
  ScratchDir dir;
  auto missing = power::ReadPowerCounters(dir.File());
  BOOST_REQUIRE(missing.ok());
  BOOST_CHECK(missing->empty());
  std::ofstream(dir.File()) << "# k8sbridge-power counters 1\nresume calls_ok=x\n";
  auto broken = power::ReadPowerCounters(dir.File());
  BOOST_REQUIRE(!broken.ok());
  BOOST_CHECK_EQUAL(broken.status().message(), dir.File() + ": line 2: 'x' is not a whole number");
  // The next run starts the counts afresh, and says so.
  auto added = power::AddPowerCall(dir.File(), Run("suspend", 1, 0, 0.1));
  BOOST_CHECK(!added.ok());
  auto fresh = power::ReadPowerCounters(dir.File());
  BOOST_REQUIRE(fresh.ok());
  BOOST_CHECK_EQUAL(fresh->at("suspend").calls_ok, 1u);
}

BOOST_AUTO_TEST_CASE(runs_at_once_lose_no_count) {
  ScratchDir dir;
  std::vector<std::thread> runs;
  for (int i = 0; i < 8; ++i) {
    runs.emplace_back([&] {
      for (int j = 0; j < 10; ++j)
        BOOST_REQUIRE(power::AddPowerCall(dir.File(), Run("resume", 1, 0, 0.01)).ok());
    });
  }
  for (std::thread& t : runs)
    t.join();
  auto read = power::ReadPowerCounters(dir.File());
  BOOST_REQUIRE(read.ok());
  BOOST_CHECK_EQUAL(read->at("resume").nodes_ok, 80u);
}

BOOST_AUTO_TEST_CASE(a_held_lock_gives_up_in_time_and_counts_nothing) {
  ScratchDir dir;
  int held = ::open((dir.File() + ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  BOOST_REQUIRE(held >= 0);
  BOOST_REQUIRE(::flock(held, LOCK_EX) == 0);
  auto added =
      power::AddPowerCall(dir.File(), Run("resume", 1, 0, 0.1), std::chrono::milliseconds(50));
  ::close(held);
  BOOST_CHECK(!added.ok());
  BOOST_CHECK(!std::filesystem::exists(dir.File()));
}

BOOST_AUTO_TEST_SUITE_END()
