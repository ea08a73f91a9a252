#include "k8sbridge/power/resume_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/slurm/node_reason.h"

namespace k8sbridge::power {

namespace {

std::string_view TypeName(const rapidjson::Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "?";
}

// A string field that may be absent or null (""), or an error naming `where`.
Result<std::string> OptionalString(const rapidjson::Value& object, const char* field,
                                   std::string_view where) {
  auto it = object.FindMember(field);
  if (it == object.MemberEnd() || it->value.IsNull())
    return std::string();
  if (!it->value.IsString()) {
    return Status::InvalidArgument(
        fmt::format("{}.{} is {}, expected a string or null", where, field, TypeName(it->value)));
  }
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

Status Fail(std::string_view source, std::string_view message) {
  return Status::InvalidArgument(fmt::format("resume file {}: {}", source, message));
}

// slurmctld names each node a few times (all_nodes_resume, then nodes_alloc and
// nodes_resume of each job on it). Each hostlist is bounded by the expander; this
// bounds a file of many jobs, which could otherwise take gigabytes.
constexpr size_t kMaxNamesPerFile = 2'000'000;

// Expands the file's hostlists, all of them together within kMaxNamesPerFile.
struct FileExpander {
  const Hostlists& hostlists;
  std::string_view source;
  size_t names = 0;

  Result<std::vector<std::string>> operator()(const std::string& expression,
                                              std::string_view where) {
    if (expression.empty())
      return std::vector<std::string>{};
    auto expanded = hostlists.Expand(expression);
    if (!expanded.ok())
      return Fail(source, fmt::format("{}: {}", where, expanded.status().message()));
    names += expanded->size();
    if (names > kMaxNamesPerFile) {
      return Fail(source, fmt::format("{}: more than {} node names in the file: not a resume "
                                      "file that slurmctld wrote",
                                      where, kMaxNamesPerFile));
    }
    return expanded;
  }
};

// jobs[i] of the file.
Result<ResumeJob> ParseJob(const rapidjson::Value& entry, rapidjson::SizeType i,
                           FileExpander& expand) {
  std::string where = fmt::format("jobs[{}]", i);
  if (!entry.IsObject())
    return Fail(expand.source, fmt::format("{} is {}, expected an object", where, TypeName(entry)));
  ResumeJob job;
  auto id = entry.FindMember("job_id");
  if (id == entry.MemberEnd() || !id->value.IsUint() || id->value.GetUint() == 0) {
    return Fail(expand.source,
                fmt::format("{}.job_id is {}, expected a positive job id", where,
                            id == entry.MemberEnd() ? "missing" : TypeName(id->value)));
  }
  job.job_id = id->value.GetUint();
  where = fmt::format("jobs[{}] (job {})", i, job.job_id);
  struct Field {
    const char* name;
    std::string* out;
  } fields[] = {{"features", &job.features},
                {"partition", &job.partition},
                {"reservation", &job.reservation},
                {"extra", &job.extra},
                {"oversubscribe", &job.oversubscribe}};
  for (const Field& field : fields) {
    auto value = OptionalString(entry, field.name, where);
    if (!value.ok())
      return Fail(expand.source, value.status().message());
    *field.out = std::move(*value);
  }
  for (auto [name, out] :
       {std::pair{"nodes_alloc", &job.nodes_alloc}, std::pair{"nodes_resume", &job.nodes_resume}}) {
    auto value = OptionalString(entry, name, where);
    if (!value.ok())
      return Fail(expand.source, value.status().message());
    auto names = expand(*value, fmt::format("{}.{}", where, name));
    if (!names.ok())
      return names.status();
    *out = std::move(*names);
  }
  return job;
}

}  // namespace

std::vector<const ResumeJob*> ResumeRequest::JobsOf(std::string_view node) const {
  std::vector<const ResumeJob*> out;
  for (const ResumeJob& job : jobs) {
    for (const std::string& n : job.nodes_alloc) {
      if (n == node) {
        out.push_back(&job);
        break;
      }
    }
  }
  return out;
}

std::map<std::string, std::vector<const ResumeJob*>, std::less<>> ResumeRequest::JobsByNode()
    const {
  std::map<std::string, std::vector<const ResumeJob*>, std::less<>> out;
  for (const ResumeJob& job : jobs) {
    for (const std::string& n : job.nodes_alloc) {
      auto& of_node = out[n];
      if (of_node.empty() || of_node.back() != &job)  // a node listed twice counts once
        of_node.push_back(&job);
    }
  }
  return out;
}

Result<ResumeRequest> ParseResumeFile(std::string_view json, std::string_view source,
                                      const Hostlists& hostlists) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return Fail(source, fmt::format("not valid JSON at byte {}: {}", doc.GetErrorOffset(),
                                    rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject())
    return Fail(source, fmt::format("the top level is {}, expected an object", TypeName(doc)));

  FileExpander expand{hostlists, source};
  ResumeRequest request;
  auto all = OptionalString(doc, "all_nodes_resume", "");
  if (!all.ok())
    return Fail(source, all.status().message().substr(1));  // drop the leading '.'
  auto all_nodes = expand(*all, "all_nodes_resume");
  if (!all_nodes.ok())
    return all_nodes.status();
  request.all_nodes_resume = std::move(*all_nodes);

  auto jobs = doc.FindMember("jobs");
  if (jobs == doc.MemberEnd() || jobs->value.IsNull())
    return request;
  if (!jobs->value.IsArray())
    return Fail(source, fmt::format("jobs is {}, expected an array", TypeName(jobs->value)));
  for (rapidjson::SizeType i = 0; i < jobs->value.Size(); ++i) {
    auto job = ParseJob(jobs->value[i], i, expand);
    if (!job.ok())
      return job.status();
    request.jobs.push_back(std::move(*job));
  }
  return request;
}

Result<std::string> ReadResumeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IoError(fmt::format(
        "cannot read SLURM_RESUME_FILE {}: {}; the file exists only while ResumeProgram runs, "
        "so read it before anything else",
        path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return Status::IoError(
        fmt::format("reading SLURM_RESUME_FILE {} failed: {}", path, std::strerror(errno)));
  }
  return text.str();
}

std::string NodeReason(const Status& status) {
  const ApiError* api = status.api_error();
  return BridgeReason(api && !api->message.empty() ? api->message : status.message());
}

void FailNodes(slurm::Slurm* slurm, const std::vector<std::string>& nodes, const Status& why,
               Logger& log) {
  if (slurm == nullptr) {
    log.Error(
        "Slurm cannot be reached (SLURM_CONF is not set or not readable): nodes {} are left "
        "for Slurm's ResumeTimeout",
        fmt::join(nodes, ","));
    return;
  }
  const std::string reason = NodeReason(why);
  for (const auto& node : nodes) {
    if (Status s = slurm->Fail(node, reason); !s.ok())
      log.Error("node {}: could not set it DOWN/POWER_DOWN: {}", node, s.message());
  }
}

Result<ResumeRequest> ResumeRequestOrFail(const std::optional<Result<std::string>>& text,
                                          std::string_view path,
                                          const std::vector<std::string>& nodes,
                                          const Hostlists& hostlists, slurm::Slurm* slurm,
                                          Logger& log) {
  if (!text)
    return ResumeRequest{};
  Result<ResumeRequest> request =
      text->ok() ? ParseResumeFile(**text, path, hostlists) : Result<ResumeRequest>(text->status());
  if (!request.ok()) {
    log.Error("{}", request.status().message());
    FailNodes(slurm, nodes, request.status(), log);
  }
  return request;
}

}  // namespace k8sbridge::power
