#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
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

// A worker's log tail as the kubelet quotes it (FallbackToLogsOnError): the
// entrypoint's info lines, then slurmd's.
constexpr std::string_view kWorkerLogTail =
    "2026-12-01T15:04:05Z k8sbridge-worker: info: slurmd is Slurm 24.11.5, as built for\n"
    "2026-12-01T15:04:05Z k8sbridge-worker: info: munge key checked: retried after error: "
    "timeout\n"
    "2026-12-01T15:04:06Z k8sbridge-worker: info: jail /jail prepared\n"
    "slurmd: debug:  Log file re-opened\n";

BOOST_AUTO_TEST_CASE(last_error_line_skips_info_lines_for_the_error) {
  const std::string log =
      std::string(kWorkerLogTail) +
      "slurmd: fatal: Unable to initialize node_features plugin\n"
      "2026-12-01T15:04:07Z k8sbridge-worker: info: slurmd exited with status 1\n";
  BOOST_TEST(k8sbridge::LastErrorLine(log) ==
             "slurmd: fatal: Unable to initialize node_features plugin");
  // An info line that quotes "error: " in its message is not an error line.
  BOOST_TEST(k8sbridge::LastErrorLine("x: info: retried after error: timeout\nx: info: done\n") ==
             "x: info: done");
}

BOOST_AUTO_TEST_CASE(last_error_line_takes_the_last_of_several_errors) {
  const std::string log = std::string(kWorkerLogTail) +
                          "[2026-12-01T15:04:06.512] error: Unable to register: Zero Bytes\n"
                          "2026-12-01T15:04:07Z k8sbridge-worker: error: munge key mismatch\n"
                          "slurmd: debug:  shutting down\n";
  BOOST_TEST(k8sbridge::LastErrorLine(log) ==
             "2026-12-01T15:04:07Z k8sbridge-worker: error: munge key mismatch");
  BOOST_TEST(k8sbridge::LastErrorLine("error: first\nfatal: second\ninfo: third\n") ==
             "fatal: second");
}

BOOST_AUTO_TEST_CASE(last_error_line_without_an_error_is_the_last_non_empty_line) {
  BOOST_TEST(k8sbridge::LastErrorLine(kWorkerLogTail) == "slurmd: debug:  Log file re-opened");
  BOOST_TEST(k8sbridge::LastErrorLine("a\n\nb\n \n\t\n") == "b");
  BOOST_TEST(k8sbridge::LastErrorLine("").empty());
  BOOST_TEST(k8sbridge::LastErrorLine("\n \r\n").empty());
}

BOOST_AUTO_TEST_CASE(last_error_line_keeps_a_single_line) {
  // What ReportFatal writes to /dev/termination-log: one line, quoted as it is.
  const std::string_view one =
      "munge key mismatch: the controller's credential does not decode here (Invalid credential)";
  BOOST_TEST(k8sbridge::LastErrorLine(one) == one);
  BOOST_TEST(k8sbridge::LastErrorLine("OOMKilled") == "OOMKilled");
}

BOOST_AUTO_TEST_CASE(last_error_line_reads_crlf_and_trailing_blank_lines) {
  BOOST_TEST(k8sbridge::LastErrorLine("info: up\r\nslurmd: error: no jail\r\n\r\n\r\n") ==
             "slurmd: error: no jail");
  BOOST_TEST(k8sbridge::LastErrorLine("one line \r\n\n") == "one line");
}

BOOST_AUTO_TEST_SUITE_END()
