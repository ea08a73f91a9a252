#include <boost/test/unit_test.hpp>

#include "k8sbridge/log.h"
#include "recording_logger.h"

using k8sbridge::LogLevel;
using k8sbridge::RecordingLogger;

BOOST_AUTO_TEST_SUITE(logger)

BOOST_AUTO_TEST_CASE(recording_logger_keeps_formatted_lines_in_order) {
  RecordingLogger logger;
  logger.Info("node {} resumed", "w-0");
  logger.Error("pod {}: {}", "w-1", "422 Invalid");
  auto lines = logger.lines();
  BOOST_REQUIRE_EQUAL(lines.size(), 2u);
  BOOST_TEST(lines[0].message == "node w-0 resumed");
  BOOST_TEST((lines[1].level == LogLevel::kError));
  BOOST_TEST(logger.Contains("422", LogLevel::kError));
  BOOST_TEST(!logger.Contains("resumed", LogLevel::kWarning));
}

BOOST_AUTO_TEST_SUITE_END()
