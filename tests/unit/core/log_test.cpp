#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "k8sbridge/log.h"
#include "recording_logger.h"

using k8sbridge::LogLevel;
using k8sbridge::ProgramLogger;
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

namespace {

// What was written to `f` so far.
std::string Written(std::FILE* f) {
  std::fflush(f);
  std::string text;
  std::rewind(f);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    text.append(buf, n);
  std::fseek(f, 0, SEEK_END);
  return text;
}

size_t Lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

BOOST_AUTO_TEST_CASE(program_logger_batches_info_lines_until_a_warning) {
  std::FILE* out = std::tmpfile();
  BOOST_REQUIRE(out);
  {
    ProgramLogger log("k8sbridge-power", out, std::chrono::hours(1));
    log.Info("node {}: pod created", "w-0");
    log.Info("node {}: pod created", "w-1");
    log.Debug("not written");
    BOOST_TEST(Written(out).empty());  // held for the next batch
    log.Warning("node {}: slow", "w-2");
    const std::string text = Written(out);
    BOOST_TEST(Lines(text) == 3u);
    BOOST_TEST(text.find("]: info: node w-0: pod created\n") != std::string::npos);
    BOOST_TEST(text.find("k8sbridge-power[") != std::string::npos);
    BOOST_TEST(text.find("info: node w-1") < text.find("warning: node w-2: slow"));
    log.Info("node {}: pod created", "w-3");
    BOOST_TEST(Lines(Written(out)) == 3u);
  }  // the destructor writes what is left
  BOOST_TEST(Lines(Written(out)) == 4u);
  std::fclose(out);
}

BOOST_AUTO_TEST_CASE(program_logger_writes_an_info_line_after_the_flush_period) {
  std::FILE* out = std::tmpfile();
  BOOST_REQUIRE(out);
  ProgramLogger log("k8sbridge-power", out, std::chrono::milliseconds(1));
  log.Info("resume {}", "w-[0-3]");
  // Polled: no other line and no destructor writes it, only the flusher.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string text;
  while ((text = Written(out)).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BOOST_TEST(text.find("info: resume w-[0-3]\n") != std::string::npos);
  log.Info("second {}", "batch");
  while (Lines(text = Written(out)) < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BOOST_TEST(Lines(text) == 2u);
  std::fclose(out);
}

BOOST_AUTO_TEST_CASE(program_logger_file_gets_lines_from_its_opening) {
  std::FILE* out = std::tmpfile();
  BOOST_REQUIRE(out);
  char path[] = "/tmp/k8sbridge-log-test-XXXXXX";
  const int fd = mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  close(fd);
  {
    ProgramLogger log("p", out, std::chrono::hours(1));
    log.Info("before the file");
    BOOST_TEST(log.OpenFile(path).ok());
    log.Info("after the file");
    auto missing = log.OpenFile("/nonexistent-dir/k8sbridge.log");
    BOOST_TEST(!missing.ok());
    BOOST_TEST(missing.message().find("LogFile=/nonexistent-dir/k8sbridge.log") !=
               std::string::npos);
  }
  std::FILE* file = std::fopen(path, "r");
  BOOST_REQUIRE(file);
  const std::string in_file = Written(file);
  std::fclose(file);
  unlink(path);
  BOOST_TEST(Lines(Written(out)) == 2u);
  BOOST_TEST(Lines(in_file) == 1u);
  BOOST_TEST(in_file.find("after the file") != std::string::npos);
  std::fclose(out);
}

BOOST_AUTO_TEST_SUITE_END()
