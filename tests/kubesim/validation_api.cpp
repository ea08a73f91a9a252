// The API server's request-level checks: fieldValidation (apiserver
// pkg/endpoints/handlers/create.go, update.go, patch.go) and resourceVersion on create
// (apiserver pkg/storage/etcd3/store.go).
#include <cstdlib>

#include <fmt/format.h>

#include "schema.h"
#include "validation.h"

namespace kubesim {

namespace {

std::string FieldValidationDirective(const ApiRequest& request) {
  auto it = request.query.find("fieldValidation");
  return it == request.query.end() || it->second.empty() ? "Warn" : it->second;
}

std::string OptionsKind(const ApiRequest& request, bool patch) {
  if (patch)
    return "PatchOptions";
  return request.method == "PUT" ? "UpdateOptions" : "CreateOptions";
}

}  // namespace

std::optional<ApiResponse> ApplyFieldValidation(const ApiRequest& request,
                                                const std::string& schema_type,
                                                const std::string& kind, const std::string& version,
                                                bool patch, rapidjson::Value& object,
                                                std::vector<std::string>& warnings) {
  std::string directive = FieldValidationDirective(request);
  if (directive != "Ignore" && directive != "Warn" && directive != "Strict") {
    return InvalidResponse(
        OptionsKind(request, patch), "meta.k8s.io", "",
        {NotSupported("fieldValidation", directive, {"", "Ignore", "Strict", "Warn"})});
  }
  std::vector<std::string> problems = DropUnknownFields(schema_type, object);
  if (problems.empty() || directive == "Ignore")
    return std::nullopt;
  if (directive == "Warn") {
    warnings.insert(warnings.end(), problems.begin(), problems.end());
    return std::nullopt;
  }
  std::string joined;
  for (const auto& p : problems)
    joined += (joined.empty() ? "" : ", ") + p;
  if (patch) {
    // NewInvalid with an empty GroupKind and name: the message starts with a space.
    return InvalidResponse("", "", "",
                           {Invalid("patch", request.body, "strict decoding error: " + joined)});
  }
  return StatusResponse(400, "BadRequest",
                        fmt::format("{} in version {} cannot be handled as a {}: strict decoding "
                                    "error: {}",
                                    kind, GoQuote(version), kind, joined));
}

void AddWarningHeaders(ApiResponse& response, const std::vector<std::string>& warnings) {
  for (const auto& w : warnings)
    response.headers.emplace_back("Warning", "299 - " + GoQuote(w));
}

std::optional<ApiResponse> RefuseResourceVersionOnCreate(const rapidjson::Value& object) {
  std::string rv = GetString(object, "metadata.resourceVersion");
  // The versioner parses it as a number; anything else (or 0) it ignores and clears.
  char* end = nullptr;
  unsigned long long n = rv.empty() ? 0 : std::strtoull(rv.c_str(), &end, 10);
  if (rv.empty() || *end != '\0' || n == 0 || rv.front() == '-')
    return std::nullopt;
  return StatusResponse(500, "", "resourceVersion should not be set on objects to be created");
}

}  // namespace kubesim
