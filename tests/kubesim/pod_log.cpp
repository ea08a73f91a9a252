#include "pod_log.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

namespace kubesim {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> Names(const rapidjson::Value& pod, const char* list) {
  std::vector<std::string> out;
  const rapidjson::Value* l = Find(pod, list);
  if (l != nullptr && l->IsArray()) {
    for (const auto& c : l->GetArray())
      out.push_back(GetString(c, "name"));
  }
  return out;
}

const rapidjson::Value* ContainerStatus(const rapidjson::Value& pod, const std::string& name) {
  for (const char* list : {"status.containerStatuses", "status.initContainerStatuses"}) {
    const rapidjson::Value* l = Find(pod, list);
    if (l == nullptr || !l->IsArray())
      continue;
    for (const auto& c : l->GetArray()) {
      if (GetString(c, "name") == name)
        return &c;
    }
  }
  return nullptr;
}

ApiResponse BadRequest(const std::string& message) {
  return StatusResponse(400, "BadRequest", message);
}

std::string Query(const ApiRequest& request, const char* key) {
  auto it = request.query.find(key);
  return it == request.query.end() ? "" : it->second;
}

}  // namespace

std::optional<ApiResponse> PickPodContainer(const rapidjson::Value& pod, const std::string& name,
                                            std::string& container) {
  const std::vector<std::string> app = Names(pod, "spec.containers");
  const std::vector<std::string> init = Names(pod, "spec.initContainers");
  if (container.empty()) {
    if (app.size() == 1) {
      container = app[0];
      return std::nullopt;
    }
    std::string message =
        fmt::format("a container name must be specified for pod {}, choose one of: [{}]", name,
                    fmt::join(app, " "));
    if (!init.empty())
      message += fmt::format(" or one of the init containers: [{}]", fmt::join(init, " "));
    return BadRequest(message);
  }
  const std::vector<std::string> ephemeral = Names(pod, "spec.ephemeralContainers");
  if (std::find(app.begin(), app.end(), container) == app.end() &&
      std::find(init.begin(), init.end(), container) == init.end() &&
      std::find(ephemeral.begin(), ephemeral.end(), container) == ephemeral.end())
    return BadRequest(fmt::format("container {} is not valid for pod {}", container, name));
  return std::nullopt;
}

std::string TailLines(const std::string& text, long lines) {
  if (lines < 0)
    return text;
  if (lines == 0)
    return "";
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n')
    --pos;
  for (long seen = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++seen == lines)
      return text.substr(pos);
  }
  return text;
}

ApiResponse PodLog(const Store& store, const std::string& log_root, const ApiRequest& request,
                   const Route& route) {
  if (route.verb != "get") {
    return StatusResponse(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource");
  }
  Result<ObjectPtr> got = store.Get("pods", route.ns, route.name);
  if (!got.ok())
    return StatusResponse(404, "NotFound", fmt::format("pods \"{}\" not found", route.name), "pods",
                          route.name);
  const rapidjson::Value& pod = **got;
  std::string container = Query(request, "container");
  if (auto bad = PickPodContainer(pod, route.name, container))
    return *bad;
  if (GetString(pod, "spec.nodeName").empty())
    return BadRequest(fmt::format("pod {} does not have a host assigned", route.name));
  const bool previous = Query(request, "previous") == "true";
  const rapidjson::Value* status = ContainerStatus(pod, container);
  const rapidjson::Value* waiting = status ? Find(*status, "state.waiting") : nullptr;
  const bool has_last = status != nullptr && Find(*status, "lastState.terminated") != nullptr;
  if (previous && !has_last) {
    return BadRequest(fmt::format("previous terminated container \"{}\" in pod \"{}\" not found",
                                  container, route.name));
  }
  if (!previous && (status == nullptr || (waiting != nullptr && !has_last))) {
    std::string reason = waiting ? GetString(*waiting, "reason") : "ContainerCreating";
    if (reason == "ErrImagePull" || reason == "ImagePullBackOff")
      reason = "trying and failing to pull image";
    return BadRequest(fmt::format("container \"{}\" in pod \"{}\" is waiting to start: {}",
                                  container, route.name, reason));
  }
  const fs::path pod_dir = fs::path(log_root) / "pods" / GetString(pod, "metadata.uid");
  const rapidjson::Value* count = status ? Find(*status, "restartCount") : nullptr;
  // The latest run (running, or exited and waiting for its restart), or the one before.
  const long run = (count != nullptr && count->IsInt() ? count->GetInt() : 0) - (previous ? 1 : 0);
  fs::path file = pod_dir / "logs" / container / fmt::format("{}.log", run);
  std::error_code ec;
  if (!fs::exists(file, ec))
    file = pod_dir / (container + ".log");  // host mode
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string tail = Query(request, "tailLines");
  std::string body = TailLines(text.str(), tail.empty() ? -1 : std::atol(tail.c_str()));
  if (const std::string limit = Query(request, "limitBytes"); !limit.empty()) {
    const long n = std::atol(limit.c_str());
    if (n > 0 && static_cast<size_t>(n) < body.size())
      body.resize(static_cast<size_t>(n));
  }
  ApiResponse r;
  r.body = body;
  r.content_type = "text/plain";
  return r;
}

}  // namespace kubesim
