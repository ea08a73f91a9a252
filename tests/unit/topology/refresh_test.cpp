#include <cstdlib>
#include <filesystem>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/topology/refresh.h"
#include "recording_logger.h"
#include "recording_reconfigurer.h"

namespace topo = k8sbridge::topology;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "k8sbridge-topo-XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(refresh)

BOOST_AUTO_TEST_CASE(reconfigures_only_when_the_rendering_changes) {
  TempDir dir;
  topo::RecordingReconfigurer slurm;
  k8sbridge::RecordingLogger logger;
  topo::RefreshOptions options{(dir.path / "topology.conf").string(), "", true};

  auto first = topo::Refresh("A\n", options, slurm, logger);
  BOOST_REQUIRE(first.ok());
  BOOST_CHECK(first->wrote && first->reconfigured);
  BOOST_CHECK_EQUAL(*topo::ReadFile(options.output_path), "A\n");

  auto same = topo::Refresh("A\n", options, slurm, logger);
  BOOST_REQUIRE(same.ok());
  BOOST_CHECK(!same->wrote && !same->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 1);

  auto changed = topo::Refresh("B\n", options, slurm, logger);
  BOOST_REQUIRE(changed.ok());
  BOOST_CHECK(changed->wrote && changed->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 2);
  // No temporary files are left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
  }
  BOOST_CHECK_EQUAL(files, 2);  // topology.conf, topology.conf.applied
}

BOOST_AUTO_TEST_CASE(a_failed_reconfigure_is_retried_next_time) {
  TempDir dir;
  topo::RecordingReconfigurer slurm;
  k8sbridge::NullLogger logger;
  topo::RefreshOptions options{(dir.path / "topology.conf").string(), "", true};
  slurm.set_fail(true);
  BOOST_CHECK(!topo::Refresh("A\n", options, slurm, logger).ok());
  BOOST_CHECK_EQUAL(*topo::ReadFile(options.output_path), "A\n");
  slurm.set_fail(false);
  auto retry = topo::Refresh("A\n", options, slurm, logger);
  BOOST_REQUIRE(retry.ok());
  BOOST_CHECK(!retry->wrote && retry->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 2);
}

BOOST_AUTO_TEST_CASE(before_slurm_starts_nothing_is_reconfigured) {
  TempDir dir;
  topo::RecordingReconfigurer slurm;
  k8sbridge::NullLogger logger;
  topo::RefreshOptions options{(dir.path / "topology.conf").string(), "", false};
  BOOST_REQUIRE(topo::Refresh("A\n", options, slurm, logger).ok());
  options.reconfigure = true;
  auto later = topo::Refresh("A\n", options, slurm, logger);
  BOOST_REQUIRE(later.ok());
  BOOST_CHECK(!later->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 0);
}

BOOST_AUTO_TEST_CASE(unwritable_directory_is_a_clear_error) {
  topo::RecordingReconfigurer slurm;
  k8sbridge::NullLogger logger;
  topo::RefreshOptions options{"/nonexistent-dir/topology.conf", "", true};
  auto r = topo::Refresh("A\n", options, slurm, logger);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().message().find("/nonexistent-dir/topology.conf.tmp") != std::string::npos);
}

// The sidecar's loop: an unchanged rendering writes and reconfigures nothing; a
// change writes once and reconfigures once; a failing source keeps the file and is
// logged once however many rounds it lasts, and its end once.
BOOST_AUTO_TEST_CASE(periodic_rounds_rewrite_only_on_change_and_log_errors_once) {
  TempDir dir;
  topo::RecordingReconfigurer slurm;
  k8sbridge::RecordingLogger logger;
  const std::string path = (dir.path / "topology.conf").string();
  topo::PeriodicRefresh refresher(topo::RefreshOptions{path, "", true}, slurm, logger);

  BOOST_REQUIRE(refresher.Round(std::string("A\n")).ok());
  auto same = refresher.Round(std::string("A\n"));
  BOOST_REQUIRE(same.ok());
  BOOST_CHECK(!same->wrote && !same->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 1);

  const k8sbridge::Status down = k8sbridge::Status::Unavailable("nodes at https://k8s: refused");
  for (int i = 0; i < 3; ++i) {
    BOOST_CHECK(!refresher.Round(k8sbridge::Result<std::string>(down)).ok());
  }
  BOOST_CHECK_EQUAL(*topo::ReadFile(path), "A\n");
  int errors = 0;
  for (const auto& line : logger.lines()) {
    errors += line.level == k8sbridge::LogLevel::kError ? 1 : 0;
  }
  BOOST_CHECK_EQUAL(errors, 1);
  BOOST_CHECK(logger.Contains("refused", k8sbridge::LogLevel::kError));

  auto changed = refresher.Round(std::string("B\n"));
  BOOST_REQUIRE(changed.ok());
  BOOST_CHECK(changed->wrote && changed->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 2);
  BOOST_CHECK(logger.Contains("refresh works again", k8sbridge::LogLevel::kInfo));
}

// A reconfigure that fails (slurmctld not up yet) is retried by the next round, not
// only by the next change.
BOOST_AUTO_TEST_CASE(periodic_rounds_retry_a_failed_reconfigure) {
  TempDir dir;
  topo::RecordingReconfigurer slurm;
  k8sbridge::NullLogger logger;
  topo::PeriodicRefresh refresher(
      topo::RefreshOptions{(dir.path / "topology.conf").string(), "", true}, slurm, logger);
  slurm.set_fail(true);
  BOOST_CHECK(!refresher.Round(std::string("A\n")).ok());
  slurm.set_fail(false);
  auto retried = refresher.Round(std::string("A\n"));
  BOOST_REQUIRE(retried.ok());
  BOOST_CHECK(!retried->wrote && retried->reconfigured);
  BOOST_CHECK_EQUAL(slurm.calls(), 2);
  auto settled = refresher.Round(std::string("A\n"));
  BOOST_REQUIRE(settled.ok());
  BOOST_CHECK(!settled->reconfigured);
}

BOOST_AUTO_TEST_SUITE_END()
