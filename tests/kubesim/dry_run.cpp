#include "dry_run.h"

#include <string>
#include <vector>

#include <fmt/format.h>

namespace kubesim {

namespace {

thread_local bool dry_run_active = false;

// The options kind each verb's handler decodes its dryRun into.
const char* OptionsKind(const std::string& verb) {
  if (verb == "create")
    return "CreateOptions";
  if (verb == "update")
    return "UpdateOptions";
  if (verb == "patch")
    return "PatchOptions";
  return "DeleteOptions";
}

// DeleteOptions.dryRun from a JSON body (kubectl delete --dry-run=server sends it there).
std::vector<std::string> BodyDryRun(const ApiRequest& request) {
  std::vector<std::string> values;
  if (request.body.empty() || request.content_type.find("json") == std::string::npos)
    return values;
  auto parsed = ParseJson(request.body);
  if (!parsed.ok() || !(*parsed)->IsObject())
    return values;
  const rapidjson::Value* list = Find(**parsed, "dryRun");
  if (list == nullptr || !list->IsArray())
    return values;
  for (const auto& v : list->GetArray())
    values.emplace_back(v.IsString() ? v.GetString() : ToJson(v));
  return values;
}

}  // namespace

DryRunScope::DryRunScope() : previous_(dry_run_active) {
  dry_run_active = true;
}

DryRunScope::~DryRunScope() {
  dry_run_active = previous_;
}

bool DryRunScope::Active() {
  return dry_run_active;
}

std::optional<ApiResponse> CheckDryRun(const ApiRequest& request, const Route& route,
                                       bool& dry_run) {
  dry_run = false;
  const std::string& verb = route.verb;
  if (verb != "create" && verb != "update" && verb != "patch" && verb != "delete" &&
      verb != "deletecollection") {
    return std::nullopt;
  }
  // A DELETE decodes its options from the body when it has one, else from the query.
  bool from_body = (verb == "delete" || verb == "deletecollection") && !request.body.empty();
  std::vector<std::string> values;
  if (from_body)
    values = BodyDryRun(request);
  auto query = request.query.find("dryRun");
  if (!from_body && query != request.query.end())
    values.push_back(query->second);
  std::string listed;
  bool all = false;
  bool bad = false;
  for (const std::string& v : values) {
    listed += fmt::format("{}\"{}\"", listed.empty() ? "" : ", ", v);
    all = all || v == "All";
    bad = bad || v != "All";
  }
  if (bad) {
    return StatusResponse(
        422, "Invalid",
        fmt::format("{}.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{{{}}}: "
                    "supported values: \"All\"",
                    OptionsKind(verb), listed),
        OptionsKind(verb), "", "meta.k8s.io");
  }
  dry_run = all;
  return std::nullopt;
}

}  // namespace kubesim
