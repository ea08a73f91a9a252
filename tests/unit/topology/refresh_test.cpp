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

BOOST_AUTO_TEST_SUITE_END()
