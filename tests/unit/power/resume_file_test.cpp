#include <memory>
#include <optional>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/log.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/power/resume_file.h"
#include "recording_logger.h"
#include "recording_slurm.h"

namespace power = k8sbridge::power;
using k8sbridge::BuiltinHostlists;

namespace {
k8sbridge::Result<power::ResumeRequest> Parse(std::string_view json) {
  return power::ParseResumeFile(json, "/proc/77/fd/3", k8sbridge::BuiltinHostlists());
}
std::string ErrorOf(std::string_view json) {
  auto r = Parse(json);
  return r.ok() ? "" : r.status().message();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(resume_file)

BOOST_AUTO_TEST_CASE(parses_the_24_11_shape) {
  auto r = Parse(R"({"all_nodes_resume":"w-[0-2]","jobs":[
    {"extra":null,"job_id":1,"features":null,"nodes_alloc":"w-[0-1]","nodes_resume":"w-[0-1]",
     "oversubscribe":"OK","partition":"main","reservation":null},
    {"extra":"x=1","job_id":42,"features":"h100&ib","nodes_alloc":"w-[1-2]","nodes_resume":"w-2",
     "oversubscribe":"NO","partition":"gpu","reservation":"maint","future_field":{"a":[1]}}],
    "some_new_top_level":true})");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_CHECK((r->all_nodes_resume == std::vector<std::string>{"w-0", "w-1", "w-2"}));
  BOOST_REQUIRE_EQUAL(r->jobs.size(), 2u);
  const power::ResumeJob& first = r->jobs[0];
  BOOST_CHECK_EQUAL(first.job_id, 1u);
  BOOST_CHECK_EQUAL(first.features, "");
  BOOST_CHECK_EQUAL(first.extra, "");
  BOOST_CHECK_EQUAL(first.reservation, "");
  BOOST_CHECK_EQUAL(first.partition, "main");
  BOOST_CHECK_EQUAL(first.oversubscribe, "OK");
  BOOST_CHECK((first.nodes_alloc == std::vector<std::string>{"w-0", "w-1"}));
  const power::ResumeJob& second = r->jobs[1];
  BOOST_CHECK_EQUAL(second.job_id, 42u);
  BOOST_CHECK_EQUAL(second.features, "h100&ib");
  BOOST_CHECK_EQUAL(second.extra, "x=1");
  BOOST_CHECK_EQUAL(second.reservation, "maint");
  BOOST_CHECK((second.nodes_resume == std::vector<std::string>{"w-2"}));

  auto of_w1 = r->JobsOf("w-1");
  BOOST_REQUIRE_EQUAL(of_w1.size(), 2u);
  BOOST_CHECK_EQUAL(of_w1[0]->job_id, 1u);
  BOOST_CHECK_EQUAL(of_w1[1]->job_id, 42u);
  BOOST_CHECK_EQUAL(r->JobsOf("w-0").size(), 1u);
  BOOST_CHECK(r->JobsOf("w-9").empty());
}

BOOST_AUTO_TEST_CASE(jobs_by_node_answers_as_jobs_of_for_every_node) {
  // Shared nodes (w-1 in both jobs, in file order) and a node listed twice in a job.
  power::ResumeRequest r;
  for (auto [id, nodes] : {std::pair{1u, std::vector<std::string>{"w-0", "w-1", "w-0"}},
                           std::pair{42u, std::vector<std::string>{"w-1", "w-2"}}}) {
    power::ResumeJob job;
    job.job_id = id;
    job.nodes_alloc = nodes;
    r.jobs.push_back(job);
  }
  const auto by_node = r.JobsByNode();
  BOOST_CHECK_EQUAL(by_node.size(), 3u);
  for (const std::string node : {"w-0", "w-1", "w-2"}) {
    BOOST_REQUIRE_EQUAL(by_node.count(node), 1u);
    BOOST_CHECK(by_node.find(node)->second == r.JobsOf(node));
  }
  BOOST_CHECK_EQUAL(by_node.find("w-1")->second.size(), 2u);
  BOOST_CHECK_EQUAL(by_node.find("w-0")->second.size(), 1u);
  BOOST_CHECK_EQUAL(by_node.count("w-9"), 0u);
}

BOOST_AUTO_TEST_CASE(tolerates_missing_and_null_parts) {
  auto r = Parse(R"({"all_nodes_resume":"w-0","jobs":null})");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK(r->jobs.empty());
  r = Parse(R"({"all_nodes_resume":"w-0"})");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK_EQUAL(r->all_nodes_resume.size(), 1u);
  r = Parse(R"({"jobs":[{"job_id":3}]})");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK(r->all_nodes_resume.empty());
  BOOST_CHECK(r->jobs[0].nodes_alloc.empty());
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_and_field) {
  BOOST_CHECK_EQUAL(ErrorOf("{\"all_nodes_resume\":"),
                    "resume file /proc/77/fd/3: not valid JSON at byte 20: Invalid value.");
  BOOST_CHECK_EQUAL(ErrorOf("[]"),
                    "resume file /proc/77/fd/3: the top level is an array, expected an object");
  BOOST_CHECK_EQUAL(ErrorOf(R"({"all_nodes_resume":7})"),
                    "resume file /proc/77/fd/3: all_nodes_resume is a number, expected a string "
                    "or null");
  BOOST_CHECK_EQUAL(ErrorOf(R"({"jobs":{}})"),
                    "resume file /proc/77/fd/3: jobs is an object, expected an array");
  BOOST_CHECK_EQUAL(ErrorOf(R"({"jobs":[{"job_id":"12"}]})"),
                    "resume file /proc/77/fd/3: jobs[0].job_id is a string, expected a positive "
                    "job id");
  BOOST_CHECK_EQUAL(ErrorOf(R"({"jobs":[{"job_id":1},{}]})"),
                    "resume file /proc/77/fd/3: jobs[1].job_id is missing, expected a positive "
                    "job id");
  BOOST_CHECK_EQUAL(ErrorOf(R"({"jobs":[{"job_id":5,"features":["a"]}]})"),
                    "resume file /proc/77/fd/3: jobs[0] (job 5).features is an array, expected a "
                    "string or null");
  std::string bad_list = ErrorOf(R"({"jobs":[{"job_id":5,"nodes_alloc":"w-[1-"}]})");
  BOOST_CHECK_MESSAGE(
      bad_list.starts_with("resume file /proc/77/fd/3: jobs[0] (job 5).nodes_alloc: "), bad_list);
}

// Reproduced with fuzz/fuzz_resume_file: each hostlist is bounded, but a file of many jobs,
// each naming a million nodes, took gigabytes (fuzz/corpus/resume_file/many-jobs.json).
BOOST_AUTO_TEST_CASE(bounds_the_names_of_the_whole_file) {
  struct MillionNames final : k8sbridge::Hostlists {
    k8sbridge::Result<std::vector<std::string>> Expand(std::string_view) const override {
      return std::vector<std::string>(1'000'000, "w");
    }
    std::string Compress(const std::vector<std::string>&) const override { return ""; }
  };
  auto r = power::ParseResumeFile(
      R"({"all_nodes_resume":"w","jobs":[{"job_id":1,"nodes_alloc":"w","nodes_resume":"w"}]})",
      "/proc/77/fd/3", MillionNames());
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(),
                    "resume file /proc/77/fd/3: jobs[0] (job 1).nodes_resume: more than 2000000 "
                    "node names in the file: not a resume file that slurmctld wrote");
}

BOOST_AUTO_TEST_CASE(reads_the_file_whole_and_names_a_missing_one) {
  auto missing = power::ReadResumeFile("/proc/self/fd/987654");
  BOOST_REQUIRE(!missing.ok());
  BOOST_CHECK_EQUAL(missing.status().message(),
                    "cannot read SLURM_RESUME_FILE /proc/self/fd/987654: No such file or "
                    "directory; the file exists only while ResumeProgram runs, so read it before "
                    "anything else");
}

BOOST_AUTO_TEST_CASE(an_unusable_resume_file_fails_every_node_at_once) {
  // Without this the nodes would sit POWERING_UP until ResumeTimeout.
  const std::vector<std::string> nodes = {"w-0", "w-1", "w-2"};
  struct Run {
    k8sbridge::slurm::RecordingSlurm slurm;
    k8sbridge::RecordingLogger log;
    k8sbridge::Result<power::ResumeRequest> request = k8sbridge::Status::Internal("not run");
  };
  auto run = [&](std::optional<k8sbridge::Result<std::string>> text, std::string_view path,
                 bool slurm_reachable) {
    auto r = std::make_unique<Run>();
    r->request = power::ResumeRequestOrFail(text, path, nodes, k8sbridge::BuiltinHostlists(),
                                            slurm_reachable ? &r->slurm : nullptr, r->log);
    return r;
  };
  auto unreadable = run(power::ReadResumeFile("/nonexistent/3"), "/nonexistent/3", true);
  BOOST_REQUIRE(!unreadable->request.ok());
  BOOST_TEST(unreadable->request.status().message().starts_with(
      "cannot read SLURM_RESUME_FILE /nonexistent/3: No such file or directory"));
  auto failed = unreadable->slurm.failed();
  BOOST_REQUIRE_EQUAL(failed.size(), 3u);
  for (const auto& node : nodes) {
    BOOST_TEST(failed.at(node).starts_with("k8sbridge: cannot read SLURM_RESUME_FILE "
                                           "/nonexistent/3: No such file or directory"),
               failed.at(node));
  }

  auto invalid = run(std::string("{\"jobs\":["), "/proc/77/fd/3", true);
  BOOST_REQUIRE(!invalid->request.ok());
  failed = invalid->slurm.failed();
  BOOST_REQUIRE_EQUAL(failed.size(), 3u);
  BOOST_TEST(failed.at("w-1").starts_with("k8sbridge: resume file /proc/77/fd/3: not valid JSON"),
             failed.at("w-1"));

  // No Slurm to tell (a manual run without SLURM_CONF): the nodes are named in the log.
  auto manual = run(std::string("[]"), "/proc/77/fd/3", false);
  BOOST_REQUIRE(!manual->request.ok());
  BOOST_TEST(manual->log.Contains("w-0,w-1,w-2 are left for Slurm's ResumeTimeout",
                                  k8sbridge::LogLevel::kError));

  // Not set (not run by slurmctld), or a good file: nothing is failed.
  auto unset = run(std::nullopt, "", true);
  BOOST_REQUIRE(unset->request.ok());
  BOOST_TEST(unset->request->jobs.empty());
  auto good =
      run(std::string(R"({"all_nodes_resume":"w-[0-2]","jobs":[]})"), "/proc/77/fd/3", true);
  BOOST_REQUIRE_MESSAGE(good->request.ok(), good->request.status().ToString());
  BOOST_TEST(good->request->all_nodes_resume.size() == 3u);
  BOOST_TEST(good->slurm.failed().empty());
}

BOOST_AUTO_TEST_SUITE_END()
