#include "api.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "disruption.h"
#include "dry_run.h"
#include "finalizers.h"
#include "managed_fields.h"
#include "patch.h"
#include "pod_log.h"
#include "pod_security.h"
#include "protobuf.h"
#include "quantity.h"
#include "rbac.h"
#include "schema.h"
#include "selector.h"
#include "serviceaccounts.h"
#include "validation.h"
#include "workloads.h"

namespace kubesim {

namespace {

struct ResourceDef {
  std::string group;
  std::string version;
  std::string resource;
  std::string kind;
  std::string singular;
  bool namespaced;
  std::vector<std::string> short_names;
  std::vector<std::string> subresources;  // "status", "binding"
};

const std::vector<ResourceDef>& Resources() {
  static const std::vector<ResourceDef> defs = {
      {"",
       "v1",
       "pods",
       "Pod",
       "pod",
       true,
       {"po"},
       {"status", "binding", "eviction", "log", "exec"}},
      {"", "v1", "nodes", "Node", "node", false, {"no"}, {"status"}},
      {"", "v1", "namespaces", "Namespace", "namespace", false, {"ns"}, {"status"}},
      {"", "v1", "configmaps", "ConfigMap", "configmap", true, {"cm"}, {}},
      {"", "v1", "secrets", "Secret", "secret", true, {}, {}},
      {"", "v1", "events", "Event", "event", true, {"ev"}, {}},
      {"events.k8s.io", "v1", "events", "Event", "event", true, {"ev"}, {}},
      {"coordination.k8s.io", "v1", "leases", "Lease", "lease", true, {}, {}},
      {"policy",
       "v1",
       "poddisruptionbudgets",
       "PodDisruptionBudget",
       "poddisruptionbudget",
       true,
       {"pdb"},
       {"status"}},
      // Authentication and RBAC (authn.h, rbac.h, serviceaccounts.h).
      {"", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", true, {"sa"}, {"token"}},
      {"rbac.authorization.k8s.io", "v1", "roles", "Role", "role", true, {}, {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "rolebindings",
       "RoleBinding",
       "rolebinding",
       true,
       {},
       {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterroles",
       "ClusterRole",
       "clusterrole",
       false,
       {},
       {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterrolebindings",
       "ClusterRoleBinding",
       "clusterrolebinding",
       false,
       {},
       {}},
      {"authorization.k8s.io",
       "v1",
       "selfsubjectaccessreviews",
       "SelfSubjectAccessReview",
       "",
       false,
       {},
       {}},
      {"authorization.k8s.io",
       "v1",
       "subjectaccessreviews",
       "SubjectAccessReview",
       "",
       false,
       {},
       {}},
      {"authorization.k8s.io",
       "v1",
       "localsubjectaccessreviews",
       "LocalSubjectAccessReview",
       "",
       true,
       {},
       {}},
      {"authorization.k8s.io",
       "v1",
       "selfsubjectrulesreviews",
       "SelfSubjectRulesReview",
       "",
       false,
       {},
       {}},
      {"authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", "", false, {}, {}},
      // Workloads (workloads.h).
      {"apps",
       "v1",
       "statefulsets",
       "StatefulSet",
       "statefulset",
       true,
       {"sts"},
       {"status", "scale"}},
      {"apps",
       "v1",
       "deployments",
       "Deployment",
       "deployment",
       true,
       {"deploy"},
       {"status", "scale"}},
      {"apps", "v1", "replicasets", "ReplicaSet", "replicaset", true, {"rs"}, {"status", "scale"}},
      {"apps",
       "v1",
       "controllerrevisions",
       "ControllerRevision",
       "controllerrevision",
       true,
       {},
       {}},
      {"batch", "v1", "jobs", "Job", "job", true, {}, {"status"}},
      {"",
       "v1",
       "persistentvolumeclaims",
       "PersistentVolumeClaim",
       "persistentvolumeclaim",
       true,
       {"pvc"},
       {"status"}},
      {"",
       "v1",
       "persistentvolumes",
       "PersistentVolume",
       "persistentvolume",
       false,
       {"pv"},
       {"status"}},
      {"", "v1", "services", "Service", "service", true, {"svc"}, {"status"}},
      {"", "v1", "endpoints", "Endpoints", "endpoints", true, {"ep"}, {}},
      {"storage.k8s.io", "v1", "storageclasses", "StorageClass", "storageclass", false, {"sc"}, {}},
  };
  return defs;
}

const ResourceDef* FindDef(const std::string& group, const std::string& version,
                           const std::string& resource) {
  for (const auto& d : Resources()) {
    if (d.group == group && d.version == version && d.resource == resource)
      return &d;
  }
  return nullptr;
}

std::string GroupVersion(const std::string& group, const std::string& version) {
  return group.empty() ? version : group + "/" + version;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t pos = s.find(sep, start);
    if (pos == std::string::npos)
      pos = s.size();
    if (pos > start)
      out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
               HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += fmt::format("{:02x}", c);
  return out;
}

std::optional<std::string> Unhex(const std::string& s) {
  if (s.size() % 2 != 0)
    return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) {
    int a = HexDigit(s[i]), b = HexDigit(s[i + 1]);
    if (a < 0 || b < 0)
      return std::nullopt;
    out += static_cast<char>(a * 16 + b);
  }
  return out;
}

bool Truthy(const std::map<std::string, std::string>& q, const char* key) {
  auto it = q.find(key);
  // Go's strconv.ParseBool spellings: the Python client sends "True".
  static const std::set<std::string> yes = {"1", "t", "T", "true", "TRUE", "True"};
  return it != q.end() && yes.count(it->second) != 0;
}

std::string QueryValue(const std::map<std::string, std::string>& q, const char* key) {
  auto it = q.find(key);
  return it == q.end() ? "" : it->second;
}

ApiResponse JsonResponse(int code, std::string body) {
  ApiResponse r;
  r.code = code;
  r.body = std::move(body);
  return r;
}

// core/v1 Event field <-> events.k8s.io/v1 Event field.
const std::vector<std::pair<const char*, const char*>>& EventRenames() {
  static const std::vector<std::pair<const char*, const char*>> renames = {
      {"involvedObject", "regarding"},
      {"message", "note"},
      {"source", "deprecatedSource"},
      {"firstTimestamp", "deprecatedFirstTimestamp"},
      {"lastTimestamp", "deprecatedLastTimestamp"},
      {"count", "deprecatedCount"},
      {"reportingComponent", "reportingController"},
  };
  return renames;
}

void RenameMembers(rapidjson::Document& doc, bool to_events_v1) {
  auto& alloc = doc.GetAllocator();
  for (const auto& [core, v1] : EventRenames()) {
    const char* from = to_events_v1 ? core : v1;
    const char* to = to_events_v1 ? v1 : core;
    auto it = doc.FindMember(from);
    if (it == doc.MemberEnd())
      continue;
    rapidjson::Value v(it->value, alloc);
    doc.RemoveMember(it);
    if (doc.HasMember(to))
      doc.RemoveMember(to);
    doc.AddMember(rapidjson::Value(to, alloc), v, alloc);
  }
  doc.RemoveMember("apiVersion");
  doc.AddMember("apiVersion", rapidjson::Value(to_events_v1 ? "events.k8s.io/v1" : "v1", alloc),
                alloc);
}

}  // namespace

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  for (const auto& pair : Split(query, '&')) {
    size_t eq = pair.find('=');
    if (eq == std::string::npos) {
      out[PercentDecode(pair)] = "";
    } else {
      out[PercentDecode(pair.substr(0, eq))] = PercentDecode(pair.substr(eq + 1));
    }
  }
  return out;
}

std::string StatusJson(int code, const std::string& reason, const std::string& message) {
  return StatusResponse(code, reason, message).body;
}

ApiResponse StatusResponse(int code, const std::string& reason, const std::string& message,
                           const std::string& kind, const std::string& name,
                           const std::string& group) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("kind", "Status", a);
  d.AddMember("apiVersion", "v1", a);
  d.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType), a);
  d.AddMember("status", rapidjson::Value(code < 300 ? "Success" : "Failure"), a);
  d.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  if (!reason.empty())
    d.AddMember("reason", rapidjson::Value(reason.c_str(), a), a);
  if (!kind.empty() || !name.empty()) {
    rapidjson::Value details(rapidjson::kObjectType);
    if (!name.empty())
      details.AddMember("name", rapidjson::Value(name.c_str(), a), a);
    if (!group.empty())
      details.AddMember("group", rapidjson::Value(group.c_str(), a), a);
    if (!kind.empty())
      details.AddMember("kind", rapidjson::Value(kind.c_str(), a), a);
    d.AddMember("details", details, a);
  }
  d.AddMember("code", code, a);
  return JsonResponse(code, ToJson(d));
}

bool WantsTable(const std::string& accept) {
  return accept.find("as=Table") != std::string::npos;
}

namespace {

std::optional<std::chrono::system_clock::time_point> ParseTimestamp(const std::string& s) {
  std::tm tm{};
  if (s.empty() || strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr)
    return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// kubectl's short human durations ("5s", "3m20s", "2h", "4d").
std::string HumanAge(const std::string& timestamp, std::chrono::system_clock::time_point now) {
  auto t = ParseTimestamp(timestamp);
  if (!t)
    return "<unknown>";
  long long s = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (s < 0)
    s = 0;
  if (s < 120)
    return fmt::format("{}s", s);
  long long m = s / 60, h = s / 3600, d = s / 86400;
  if (m < 10)
    return s % 60 == 0 ? fmt::format("{}m", m) : fmt::format("{}m{}s", m, s % 60);
  if (h < 3)
    return fmt::format("{}m", m);
  if (h < 8)
    return m % 60 == 0 ? fmt::format("{}h", h) : fmt::format("{}h{}m", h, m % 60);
  if (h < 48)
    return fmt::format("{}h", h);
  if (d < 8)
    return h % 24 == 0 ? fmt::format("{}d", d) : fmt::format("{}d{}h", d, h % 24);
  return fmt::format("{}d", d);
}

struct Column {
  const char* name;
  const char* type;
  const char* format;
  int priority;
};

std::vector<Column> ColumnsFor(const std::string& resource) {
  if (const std::vector<TableColumn>* columns = WorkloadTableColumns(resource)) {
    std::vector<Column> out;
    for (const TableColumn& c : *columns)
      out.push_back({c.name, "string", out.empty() ? "name" : "", c.priority});
    return out;
  }
  if (resource == "pods") {
    return {{"Name", "string", "name", 0},
            {"Ready", "string", "", 0},
            {"Status", "string", "", 0},
            {"Restarts", "string", "", 0},
            {"Age", "string", "", 0},
            {"IP", "string", "", 1},
            {"Node", "string", "", 1},
            {"Nominated Node", "string", "", 1},
            {"Readiness Gates", "string", "", 1}};
  }
  if (resource == "nodes") {
    return {{"Name", "string", "name", 0}, {"Status", "string", "", 0},
            {"Roles", "string", "", 0},    {"Age", "string", "", 0},
            {"Version", "string", "", 0},  {"Internal-IP", "string", "", 1}};
  }
  if (resource == "events") {
    return {{"Last Seen", "string", "", 0},
            {"Type", "string", "", 0},
            {"Reason", "string", "", 0},
            {"Object", "string", "", 0},
            {"Message", "string", "", 0}};
  }
  if (resource == "namespaces") {
    return {{"Name", "string", "name", 0}, {"Status", "string", "", 0}, {"Age", "string", "", 0}};
  }
  if (resource == "leases") {
    return {{"Name", "string", "name", 0}, {"Holder", "string", "", 0}, {"Age", "string", "", 0}};
  }
  return {{"Name", "string", "name", 0}, {"Age", "string", "", 0}};
}

void AddCells(const std::string& resource, const rapidjson::Value& o, rapidjson::Value& cells,
              rapidjson::Document::AllocatorType& a, std::chrono::system_clock::time_point now) {
  auto str = [&](const std::string& v) { cells.PushBack(rapidjson::Value(v.c_str(), a), a); };
  std::string name = GetString(o, "metadata.name");
  std::string age = HumanAge(GetString(o, "metadata.creationTimestamp"), now);
  if (WorkloadTableColumns(resource) != nullptr) {
    for (const std::string& cell : WorkloadTableCells(resource, o, age))
      str(cell);
    return;
  }
  if (resource == "pods") {
    const rapidjson::Value* containers = Find(o, "spec.containers");
    size_t total = containers != nullptr && containers->IsArray() ? containers->Size() : 0;
    size_t ready = 0;
    long long restarts = 0;
    std::string status = GetString(o, "status.phase");
    if (!GetString(o, "status.reason").empty())
      status = GetString(o, "status.reason");
    const rapidjson::Value* statuses = Find(o, "status.containerStatuses");
    if (statuses != nullptr && statuses->IsArray()) {
      for (const auto& cs : statuses->GetArray()) {
        const rapidjson::Value* r = Find(cs, "ready");
        if (r != nullptr && r->IsBool() && r->GetBool())
          ++ready;
        const rapidjson::Value* rc = Find(cs, "restartCount");
        if (rc != nullptr && rc->IsInt64())
          restarts += rc->GetInt64();
        std::string waiting = GetString(cs, "state.waiting.reason");
        std::string terminated = GetString(cs, "state.terminated.reason");
        if (!waiting.empty())
          status = waiting;
        if (!terminated.empty() && status != "Running")
          status = terminated;
      }
    }
    if (Find(o, "metadata.deletionTimestamp") != nullptr)
      status = "Terminating";
    std::string node = GetString(o, "spec.nodeName");
    std::string ip = GetString(o, "status.podIP");
    std::string nominated = GetString(o, "status.nominatedNodeName");
    str(name);
    str(fmt::format("{}/{}", ready, total));
    str(status);
    str(std::to_string(restarts));
    str(age);
    str(ip.empty() ? "<none>" : ip);
    str(node.empty() ? "<none>" : node);
    str(nominated.empty() ? "<none>" : nominated);
    str("<none>");
  } else if (resource == "nodes") {
    std::string ready = "Unknown";
    const rapidjson::Value* conditions = Find(o, "status.conditions");
    if (conditions != nullptr && conditions->IsArray()) {
      for (const auto& c : conditions->GetArray()) {
        if (GetString(c, "type") == "Ready") {
          ready = GetString(c, "status") == "True" ? "Ready" : "NotReady";
        }
      }
    }
    const rapidjson::Value* unsched = Find(o, "spec.unschedulable");
    if (unsched != nullptr && unsched->IsBool() && unsched->GetBool()) {
      ready += ",SchedulingDisabled";
    }
    std::string internal_ip = "<none>";
    const rapidjson::Value* addresses = Find(o, "status.addresses");
    if (addresses != nullptr && addresses->IsArray()) {
      for (const auto& ad : addresses->GetArray()) {
        if (GetString(ad, "type") == "InternalIP")
          internal_ip = GetString(ad, "address");
      }
    }
    std::string version = GetString(o, "status.nodeInfo.kubeletVersion");
    str(name);
    str(ready);
    str("<none>");
    str(age);
    str(version.empty() ? "<none>" : version);
    str(internal_ip);
  } else if (resource == "events") {
    std::string last = GetString(o, "lastTimestamp");
    if (last.empty())
      last = GetString(o, "series.lastObservedTime");
    if (last.empty())
      last = GetString(o, "eventTime");
    if (last.empty())
      last = GetString(o, "metadata.creationTimestamp");
    std::string kind = GetString(o, "involvedObject.kind");
    for (auto& ch : kind)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    str(HumanAge(last, now));
    str(GetString(o, "type"));
    str(GetString(o, "reason"));
    str(kind + "/" + GetString(o, "involvedObject.name"));
    str(GetString(o, "message"));
  } else if (resource == "namespaces") {
    str(name);
    str(GetString(o, "status.phase"));
    str(age);
  } else if (resource == "leases") {
    std::string holder = GetString(o, "spec.holderIdentity");
    str(name);
    str(holder.empty() ? "<none>" : holder);
    str(age);
  } else {
    str(name);
    str(age);
  }
}

}  // namespace

std::string RenderTable(const std::string& resource, const std::string& group,
                        const std::vector<const rapidjson::Value*>& objects,
                        const std::string& resource_version, const std::string& continue_token,
                        bool with_columns, std::chrono::system_clock::time_point now) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("kind", "Table", a);
  d.AddMember("apiVersion", "meta.k8s.io/v1", a);
  rapidjson::Value meta(rapidjson::kObjectType);
  if (!resource_version.empty()) {
    meta.AddMember("resourceVersion", rapidjson::Value(resource_version.c_str(), a), a);
  }
  if (!continue_token.empty()) {
    meta.AddMember("continue", rapidjson::Value(continue_token.c_str(), a), a);
  }
  d.AddMember("metadata", meta, a);
  rapidjson::Value columns(rapidjson::kArrayType);
  if (with_columns) {
    for (const auto& c : ColumnsFor(resource)) {
      rapidjson::Value col(rapidjson::kObjectType);
      col.AddMember("name", rapidjson::StringRef(c.name), a);
      col.AddMember("type", rapidjson::StringRef(c.type), a);
      col.AddMember("format", rapidjson::StringRef(c.format), a);
      col.AddMember("description", "", a);
      col.AddMember("priority", c.priority, a);
      columns.PushBack(col, a);
    }
  }
  d.AddMember("columnDefinitions", columns, a);
  rapidjson::Value rows(rapidjson::kArrayType);
  for (const rapidjson::Value* o : objects) {
    rapidjson::Value row(rapidjson::kObjectType);
    rapidjson::Value cells(rapidjson::kArrayType);
    AddCells(resource, *o, cells, a, now);
    row.AddMember("cells", cells, a);
    rapidjson::Document rendered;
    rendered.Parse(RenderObject(*o, group).c_str());
    row.AddMember("object", rapidjson::Value(rendered, a), a);
    rows.PushBack(row, a);
  }
  d.AddMember("rows", rows, a);
  return ToJson(d);
}

std::string RenderObject(const rapidjson::Value& stored, const std::string& group) {
  if (group != "events.k8s.io")
    return ToJson(stored);
  rapidjson::Document doc;
  doc.CopyFrom(stored, doc.GetAllocator());
  RenameMembers(doc, true);
  return ToJson(doc);
}

bool Api::ResolveRoute(const ApiRequest& request, Route& route, ApiResponse& error) const {
  auto segs = Split(request.path, '/');
  auto not_found = [&]() {
    error = StatusResponse(404, "NotFound", "the server could not find the requested resource");
    return false;
  };
  route = Route{};
  size_t i;
  if (segs.size() >= 2 && segs[0] == "api" && segs[1] == "v1") {
    route.version = "v1";
    i = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis") {
    route.group = segs[1];
    route.version = segs[2];
    i = 3;
  } else {
    return true;  // discovery, version, health: Handle decides
  }
  std::vector<std::string> rest(segs.begin() + i, segs.end());
  if (rest.empty())
    return true;
  if (rest.size() >= 3 && rest[0] == "namespaces" &&
      FindDef(route.group, route.version, rest[2]) != nullptr &&
      FindDef(route.group, route.version, rest[2])->namespaced) {
    route.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  const ResourceDef* def = FindDef(route.group, route.version, rest[0]);
  if (def == nullptr)
    return not_found();
  route.resource = rest[0];
  if (rest.size() >= 2)
    route.name = rest[1];
  if (rest.size() >= 3) {
    route.subresource = rest[2];
    if (std::find(def->subresources.begin(), def->subresources.end(), route.subresource) ==
        def->subresources.end()) {
      return not_found();
    }
  }
  if (rest.size() > 3)
    return not_found();
  const std::string& m = request.method;
  bool named = !route.name.empty();
  if (m == "GET") {
    route.verb = Truthy(request.query, "watch") ? "watch" : (named ? "get" : "list");
  } else if (m == "POST" && !named) {
    route.verb = "create";
  } else if (m == "POST" && (route.subresource == "binding" || route.subresource == "eviction" ||
                             route.subresource == "token" || route.subresource == "exec")) {
    route.verb = "create";
  } else if (m == "PUT" && named) {
    route.verb = "update";
  } else if (m == "PATCH" && named) {
    route.verb = "patch";
  } else if (m == "DELETE") {
    route.verb = named ? "delete" : "deletecollection";
  } else {
    error = StatusResponse(405, "MethodNotAllowed",
                           fmt::format("the server does not allow this method on the requested "
                                       "resource"));
    return false;
  }
  if ((route.subresource == "binding" || route.subresource == "eviction" ||
       route.subresource == "token") &&
      route.verb != "create") {
    error = StatusResponse(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource");
    return false;
  }
  return true;
}

ApiResponse Api::Discovery(const std::string& path) const {
  auto resource_list = [&](const std::string& group, const std::string& version) {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    d.AddMember("kind", "APIResourceList", a);
    d.AddMember("apiVersion", "v1", a);
    d.AddMember("groupVersion", rapidjson::Value(GroupVersion(group, version).c_str(), a), a);
    rapidjson::Value list(rapidjson::kArrayType);
    for (const auto& def : Resources()) {
      if (def.group != group || def.version != version)
        continue;
      auto add = [&](const std::string& name, const std::string& singular, const std::string& kind,
                     std::vector<const char*> verbs, bool with_names) {
        rapidjson::Value r(rapidjson::kObjectType);
        r.AddMember("name", rapidjson::Value(name.c_str(), a), a);
        r.AddMember("singularName", rapidjson::Value(singular.c_str(), a), a);
        r.AddMember("namespaced", def.namespaced, a);
        r.AddMember("kind", rapidjson::Value(kind.c_str(), a), a);
        rapidjson::Value v(rapidjson::kArrayType);
        for (const char* verb : verbs)
          v.PushBack(rapidjson::Value(verb, a), a);
        r.AddMember("verbs", v, a);
        if (with_names && !def.short_names.empty()) {
          rapidjson::Value sn(rapidjson::kArrayType);
          for (const auto& s : def.short_names)
            sn.PushBack(rapidjson::Value(s.c_str(), a), a);
          r.AddMember("shortNames", sn, a);
        }
        static const std::set<std::string> kAll = {"pods",        "services",     "deployments",
                                                   "replicasets", "statefulsets", "jobs"};
        if (with_names && kAll.count(def.resource) != 0) {
          rapidjson::Value cats(rapidjson::kArrayType);
          cats.PushBack("all", a);
          r.AddMember("categories", cats, a);
        }
        list.PushBack(r, a);
      };
      if (IsReviewResource(def.group, def.resource)) {
        add(def.resource, def.singular, def.kind, {"create"}, false);
        continue;
      }
      add(def.resource, def.singular, def.kind,
          {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
          true);
      for (const auto& sub : def.subresources) {
        if (sub == "binding") {
          add(def.resource + "/binding", "", "Binding", {"create"}, false);
        } else if (sub == "token") {
          add(def.resource + "/token", "", "TokenRequest", {"create"}, false);
          auto& token = list[list.Size() - 1];
          token.AddMember("group", "authentication.k8s.io", a);
          token.AddMember("version", "v1", a);
        } else if (sub == "eviction") {
          add(def.resource + "/eviction", "", "Eviction", {"create"}, false);
          // The Eviction kind comes from policy/v1; kubectl drain looks for this.
          auto& eviction = list[list.Size() - 1];
          eviction.AddMember("group", "policy", a);
          eviction.AddMember("version", "v1", a);
        } else if (sub == "log") {
          add(def.resource + "/log", "", def.kind, {"get"}, false);
        } else if (sub == "exec") {
          add(def.resource + "/exec", "", "PodExecOptions", {"create", "get"}, false);
        } else if (sub == "scale") {
          add(def.resource + "/scale", "", "Scale", {"get", "patch", "update"}, false);
          auto& scale = list[list.Size() - 1];
          scale.AddMember("group", "autoscaling", a);
          scale.AddMember("version", "v1", a);
        } else {
          add(def.resource + "/" + sub, "", def.kind, {"get", "patch", "update"}, false);
        }
      }
    }
    d.AddMember("resources", list, a);
    return JsonResponse(200, ToJson(d));
  };
  if (path == "/api" || path == "/api/") {
    return JsonResponse(200,
                        R"({"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":)"
                        R"([{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1:443"}]})");
  }
  if (path == "/api/v1")
    return resource_list("", "v1");
  if (path == "/apis" || path == "/apis/") {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    d.AddMember("kind", "APIGroupList", a);
    d.AddMember("apiVersion", "v1", a);
    rapidjson::Value groups(rapidjson::kArrayType);
    std::set<std::string> seen;
    for (const auto& def : Resources()) {
      if (def.group.empty() || !seen.insert(def.group).second)
        continue;
      rapidjson::Value g(rapidjson::kObjectType);
      g.AddMember("name", rapidjson::Value(def.group.c_str(), a), a);
      rapidjson::Value gv(rapidjson::kObjectType);
      gv.AddMember("groupVersion",
                   rapidjson::Value(GroupVersion(def.group, def.version).c_str(), a), a);
      gv.AddMember("version", rapidjson::Value(def.version.c_str(), a), a);
      rapidjson::Value versions(rapidjson::kArrayType);
      versions.PushBack(rapidjson::Value(gv, a), a);
      g.AddMember("versions", versions, a);
      g.AddMember("preferredVersion", gv, a);
      groups.PushBack(g, a);
    }
    d.AddMember("groups", groups, a);
    return JsonResponse(200, ToJson(d));
  }
  auto segs = Split(path, '/');
  if (segs.size() == 3 && segs[0] == "apis") {
    for (const auto& def : Resources()) {
      if (def.group == segs[1] && def.version == segs[2])
        return resource_list(segs[1], segs[2]);
    }
  }
  if (segs.size() == 2 && segs[0] == "apis") {
    for (const auto& def : Resources()) {
      if (def.group == segs[1]) {
        std::string gv = GroupVersion(def.group, def.version);
        return JsonResponse(
            200, fmt::format(R"({{"kind":"APIGroup","apiVersion":"v1","name":"{}","versions":)"
                             R"([{{"groupVersion":"{}","version":"{}"}}],"preferredVersion":)"
                             R"({{"groupVersion":"{}","version":"{}"}}}})",
                             def.group, gv, def.version, gv, def.version));
      }
    }
  }
  // OpenAPI v3: only what kubectl needs to see that the server does field validation
  // (the PATCH operations with their fieldValidation parameter); no schemas.
  if (path == "/openapi/v3" || path == "/openapi/v3/") {
    std::set<std::string> gvs;
    for (const auto& def : Resources())
      gvs.insert(GroupVersion(def.group, def.version));
    std::string paths;
    for (const auto& gv : gvs) {
      std::string p = gv == "v1" ? "api/v1" : "apis/" + gv;
      if (!paths.empty())
        paths += ",";
      paths += fmt::format(R"("{}":{{"serverRelativeURL":"/openapi/v3/{}?hash=kubesim"}})", p, p);
    }
    return JsonResponse(200, "{\"paths\":{" + paths + "}}");
  }
  if (path.rfind("/openapi/v3/", 0) == 0) {
    std::string gv_path = path.substr(std::string("/openapi/v3/").size());
    std::string paths;
    for (const auto& def : Resources()) {
      std::string p =
          def.group.empty() ? "api/" + def.version : "apis/" + def.group + "/" + def.version;
      if (p != gv_path)
        continue;
      std::string gvk = fmt::format(
          R"("x-kubernetes-group-version-kind":{{"group":"{}","version":"{}","kind":"{}"}})",
          def.group, def.version, def.kind);
      std::string params =
          R"("parameters":[{"name":"fieldValidation","in":"query","schema":{"type":"string"}},)"
          R"({"name":"fieldManager","in":"query","schema":{"type":"string"}},)"
          R"({"name":"dryRun","in":"query","schema":{"type":"string"}}])";
      std::string base =
          "/" + p + (def.namespaced ? "/namespaces/{namespace}/" : "/") + def.resource;
      if (!paths.empty())
        paths += ",";
      paths += fmt::format(
          R"("{}":{{"post":{{{},{}}}}},"{}/{{name}}":{{"put":{{{},{}}},"patch":{{{},{}}}}})", base,
          gvk, params, base, gvk, params, gvk, params);
    }
    if (paths.empty()) {
      return StatusResponse(404, "NotFound", "the server could not find the requested resource");
    }
    return JsonResponse(
        200,
        R"({"openapi":"3.0.0","info":{"title":"Kubernetes","version":"v1.32.0-kubesim"},"paths":{)" +
            paths + "}}");
  }
  if (path == "/version" || path == "/version/") {
    return JsonResponse(
        200, R"({"major":"1","minor":"32","gitVersion":"v1.32.0-kubesim","gitCommit":"kubesim",)"
             R"("gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z","goVersion":"go1.23",)"
             R"("compiler":"gc","platform":"linux/amd64"})");
  }
  if (path == "/healthz" || path == "/livez" || path == "/readyz") {
    ApiResponse r = JsonResponse(200, "ok");
    r.content_type = "text/plain";
    return r;
  }
  return StatusResponse(404, "NotFound", "the server could not find the requested resource");
}

ApiResponse Api::ErrorFromStatus(const Status& status, const Route& route) const {
  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  std::string kind = route.resource;
  std::string group = route.group;
  switch (status.code()) {
    case Status::Code::kNotFound:
      return StatusResponse(404, "NotFound", status.message(), kind, route.name, group);
    case Status::Code::kAlreadyExists:
      return StatusResponse(409, "AlreadyExists", status.message(), kind, route.name, group);
    case Status::Code::kConflict:
      return StatusResponse(409, "Conflict", status.message(), kind, route.name, group);
    case Status::Code::kExpired:
      return StatusResponse(410, "Expired", status.message());
    case Status::Code::kInvalidArgument:
      return StatusResponse(
          422, "Invalid",
          fmt::format("{} \"{}\" is invalid: {}", def != nullptr ? def->kind : kind, route.name,
                      status.message()),
          def != nullptr ? def->kind : kind, route.name, group);
    default:
      return StatusResponse(500, "InternalError", status.message());
  }
}

ApiResponse Api::Handle(const ApiRequest& request, const Route& route) {
  if (request.content_type.find("protobuf") != std::string::npos) {
    // The protobuf bodies kubesim reads (protobuf.h) are taken on as JSON.
    auto as_json_body = ProtobufBodyAsJson(request.body);
    if (as_json_body.ok()) {
      ApiRequest as_json = request;
      as_json.content_type = "application/json";
      as_json.body = std::move(*as_json_body);
      return Handle(as_json, route);
    }
    if (as_json_body.status().code() == Status::Code::kInvalidArgument)
      return StatusResponse(400, "BadRequest", as_json_body.status().message());
    return StatusResponse(415, "UnsupportedMediaType",
                          fmt::format("the body of the request was in an unknown format - "
                                      "accepted media types include: application/json, "
                                      "application/yaml"));
  }
  bool dry_run = false;
  if (auto bad = CheckDryRun(request, route, dry_run))
    return *bad;
  std::optional<DryRunScope> dry_run_scope;
  if (dry_run)
    dry_run_scope.emplace();
  if (route.resource.empty()) {
    if (request.method != "GET") {
      return StatusResponse(405, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
    }
    return Discovery(request.path);
  }
  if (IsReviewResource(route.group, route.resource))
    return HandleReview(store_, request, route);
  if (route.resource == "serviceaccounts" && route.subresource == "token") {
    if (token_issuer_ == nullptr)
      return StatusResponse(503, "ServiceUnavailable", "no token issuer is configured");
    return CreateTokenRequest(*token_issuer_, store_, request, route);
  }
  if (route.subresource == "log")
    return PodLog(store_, pod_log_root_, request, route);  // pod_log.h
  if (route.subresource == "exec")  // the server upgrades an exec (exec.h); nothing else
    return StatusResponse(400, "BadRequest", "Upgrade request required");
  if (route.subresource == "scale")
    return HandleScale(store_, request, route);
  if (route.verb == "get")
    return Get(route, WantsTable(request.accept));
  if (route.verb == "list")
    return List(request, route);
  if (route.verb == "create")
    return Create(request, route);
  if (route.verb == "update")
    return Update(request, route);
  if (route.verb == "patch")
    return Patch(request, route);
  if (route.verb == "delete")
    return Delete(request, route);
  if (route.verb == "deletecollection")
    return DeleteCollection(request, route);
  return StatusResponse(405, "MethodNotAllowed", "watch must be streamed");
}

ApiResponse Api::Get(const Route& route, bool table) {
  auto obj = store_.Get(route.resource, route.ns, route.name);
  if (!obj.ok())
    return ErrorFromStatus(obj.status(), route);
  if (table) {
    return JsonResponse(200, RenderTable(route.resource, route.group, {obj->get()}, "", "", true,
                                         store_.clock().WallNow()));
  }
  return JsonResponse(200, RenderObject(**obj, route.group));
}

namespace {

struct Selectors {
  LabelSelector labels;
  FieldSelector fields;
  bool Matches(const rapidjson::Value& v) const { return labels.Matches(v) && fields.Matches(v); }
};

// Parses labelSelector and fieldSelector; nullopt with `error` set on a bad one.
std::optional<Selectors> ParseSelectors(const ApiRequest& request, const Route& route,
                                        ApiResponse& error) {
  auto labels = LabelSelector::Parse(QueryValue(request.query, "labelSelector"));
  if (!labels.ok()) {
    error = StatusResponse(400, "BadRequest", labels.status().message());
    return std::nullopt;
  }
  std::string field_text = QueryValue(request.query, "fieldSelector");
  if (!route.name.empty()) {
    field_text = field_text.empty() ? "metadata.name=" + route.name
                                    : field_text + ",metadata.name=" + route.name;
  }
  auto fields = FieldSelector::Parse(route.resource, field_text);
  if (!fields.ok()) {
    error = StatusResponse(400, "BadRequest", fields.status().message());
    return std::nullopt;
  }
  return Selectors{std::move(*labels), std::move(*fields)};
}

// The page after `key` ("namespace/name" of a continue token; "" = the first page).
ListPage PageAfter(const std::string& key, size_t limit) {
  ListPage page;
  page.limit = limit;
  if (!key.empty()) {
    const size_t slash = key.find('/');
    page.after = true;
    page.after_ns = key.substr(0, slash);
    page.after_name = slash == std::string::npos ? "" : key.substr(slash + 1);
  }
  return page;
}

std::string ListKind(const Route& route) {
  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  return (def != nullptr ? def->kind : std::string("Unknown")) + "List";
}

}  // namespace

ApiResponse Api::List(const ApiRequest& request, const Route& route) {
  ApiResponse error;
  auto selectors = ParseSelectors(request, route, error);
  if (!selectors)
    return error;
  size_t limit = 0;
  std::string limit_text = QueryValue(request.query, "limit");
  if (!limit_text.empty()) {
    if (limit_text.find_first_not_of("0123456789") != std::string::npos) {
      return StatusResponse(400, "BadRequest", fmt::format("invalid limit \"{}\"", limit_text));
    }
    limit = std::stoull(limit_text);
  }
  // The continue token: the list's RV and the last key handed out, hex-encoded.
  uint64_t list_rv = 0;
  std::string after_key;
  std::string cont = QueryValue(request.query, "continue");
  if (!cont.empty()) {
    auto decoded = Unhex(cont);
    size_t bar = decoded ? decoded->find('|') : std::string::npos;
    if (bar == std::string::npos) {
      return StatusResponse(400, "BadRequest", "continue key is not valid: not a kubesim token");
    }
    list_rv = std::strtoull(decoded->substr(0, bar).c_str(), nullptr, 10);
    after_key = decoded->substr(bar + 1);
    if (list_rv < store_.OldestResumableResourceVersion()) {
      return StatusResponse(
          410, "Expired",
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter.");
    }
  }
  // The page starts after the token's key, found in the store's order (one walk
  // over a large list for all its pages, as etcd serves them).
  ListPage window = PageAfter(after_key, limit);
  if (route.resource == "pods")
    window.pods_on_node = selectors->fields.RequiredValue("spec.nodeName");
  auto matches = [&](const rapidjson::Value& v) { return selectors->Matches(v); };
  ListResult result = store_.List(route.resource, route.ns, matches, window);
  if (list_rv == 0)
    list_rv = result.resource_version;
  std::string body = fmt::format(R"({{"kind":"{}","apiVersion":"{}","metadata":{{)",
                                 ListKind(route), GroupVersion(route.group, route.version));
  std::string items;
  std::vector<const rapidjson::Value*> page;
  std::string last_key;
  for (const auto& obj : result.items) {
    if (!items.empty())
      items += ",";
    items += RenderObject(*obj, route.group);
    page.push_back(obj.get());
    last_key = GetString(*obj, "metadata.namespace") + "/" + GetString(*obj, "metadata.name");
  }
  // Like the API server, remainingItemCount only for a list without selectors.
  size_t remaining = 0;
  if (result.more && QueryValue(request.query, "labelSelector").empty() &&
      QueryValue(request.query, "fieldSelector").empty() && route.name.empty()) {
    remaining = store_.List(route.resource, route.ns, {}, PageAfter(last_key, 0)).items.size();
  }
  if (WantsTable(request.accept)) {
    return JsonResponse(
        200, RenderTable(route.resource, route.group, page, std::to_string(list_rv),
                         result.more ? Hex(fmt::format("{}|{}", list_rv, last_key)) : "", true,
                         store_.clock().WallNow()));
  }
  body += fmt::format(R"("resourceVersion":"{}")", list_rv);
  if (result.more) {
    body += fmt::format(R"(,"continue":"{}")", Hex(fmt::format("{}|{}", list_rv, last_key)));
    if (remaining != 0)
      body += fmt::format(R"(,"remainingItemCount":{})", remaining);
  }
  body += "},\"items\":[" + items + "]}";
  return JsonResponse(200, body);
}

namespace {

// Who writes, for managedFields (managed_fields.h).
WriteContext WriteContextOf(const ApiRequest& request, const Route& route, const Store& store) {
  WriteContext context;
  context.manager = QueryValue(request.query, "fieldManager");
  if (context.manager.empty()) {
    // handlers/rest.go managerOrUserAgent: the User-Agent up to its first '/',
    // printable characters only, at most 128.
    for (char c : request.user_agent.substr(0, request.user_agent.find('/'))) {
      if (std::isprint(static_cast<unsigned char>(c)) && context.manager.size() < 128)
        context.manager += c;
    }
  }
  context.api_version = GroupVersion(route.group, route.version);
  context.now = store.NowTimestamp();
  context.subresource = route.subresource;
  return context;
}

}  // namespace

namespace {

// Parses a request body (JSON, or YAML for apply and for YAML content types).
Result<std::unique_ptr<rapidjson::Document>> ParseBody(const ApiRequest& request) {
  if (request.content_type.find("yaml") != std::string::npos)
    return YamlToJson(request.body);
  return ParseJson(request.body);
}

ApiResponse BadBody(const Status& s) {
  return StatusResponse(400, "BadRequest", s.message());
}

// As rest.BeforeCreate: a namespaced object gets the request's namespace (or
// "default"), a cluster-scoped one loses any namespace it carries.
void PrepareNamespace(const ResourceDef& def, const std::string& request_ns,
                      rapidjson::Document& doc) {
  rapidjson::Value* meta = doc.HasMember("metadata") ? &doc["metadata"] : nullptr;
  if (!def.namespaced) {
    if (meta != nullptr && meta->IsObject())
      meta->RemoveMember("namespace");
  } else if (GetString(doc, "metadata.namespace").empty()) {
    std::string ns = request_ns.empty() ? "default" : request_ns;
    SetMember(doc, "metadata.namespace", rapidjson::Value(ns.c_str(), doc.GetAllocator()));
  }
}

// The update checks (validation.h) of `next` against the stored object; /status
// writes keep the stored spec and metadata, so they have none.
std::optional<ApiResponse> ValidateAgainstStored(const Route& route, const rapidjson::Value& next,
                                                 const rapidjson::Value& stored) {
  if (route.subresource == "status")
    return std::nullopt;
  FieldErrors errors = ValidateUpdate(route.group, route.resource, next, stored);
  if (errors.empty())
    return std::nullopt;
  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  return InvalidResponse(def->kind, route.group, route.name, errors);
}

// fieldValidation and the update checks for the result of a patch, which is in the
// stored (core/v1 for events) form.
std::optional<ApiResponse> CheckPatchedObject(const ApiRequest& request, const Route& route,
                                              rapidjson::Document& next,
                                              const rapidjson::Value& current,
                                              std::vector<std::string>& warnings) {
  std::string group = route.group == "events.k8s.io" ? "" : route.group;
  if (auto refused = ApplyFieldValidation(request, SchemaTypeFor(group, route.resource), "",
                                          route.version, true, next, warnings))
    return refused;
  ReplaceInvalidUtf8(next, next.GetAllocator());
  if (route.subresource.empty())
    DefaultWorkload(route.resource, next);
  return ValidateAgainstStored(route, next, current);
}

// Writes of the RBAC kinds: the v1 defaults (also for updates and patches, as the
// decoder applies them) and the escalation check of the policybased storages, before
// validation. `current` the stored object of an update.
std::optional<ApiResponse> CheckRbacWrite(const Store& store, const ApiRequest& request,
                                          const Route& route, rapidjson::Document& doc,
                                          const rapidjson::Value* current) {
  if (!IsRbacResource(route.group, route.resource))
    return std::nullopt;
  DefaultRbacObject(route.resource, doc);
  if (request.user.empty())
    return std::nullopt;  // an in-process caller, not a request the server authenticated
  return CheckRbacEscalation(store, UserOfRequest(request), route.resource, route.ns, doc, current);
}

// The mutating admission of a create (before validation, as upstream):
// DefaultTolerationSeconds and ServiceAccount for pods, the v1 defaults of RBAC
// subjects. A refusal is the answer.
std::optional<ApiResponse> AdmitCreate(Store& store, const AdmissionOptions& admission,
                                       const Route& route, rapidjson::Document& doc) {
  if (route.resource == "pods") {
    AddDefaultTolerations(doc, admission);
    return AdmitPodServiceAccount(store, admission.root_ca_pem,
                                  GetString(doc, "metadata.namespace"), doc);
  }
  return std::nullopt;
}

}  // namespace

ApiResponse Api::Create(const ApiRequest& request, const Route& route) {
  auto parsed = ParseBody(request);
  if (!parsed.ok())
    return BadBody(parsed.status());
  rapidjson::Document& doc = **parsed;
  if (!doc.IsObject())
    return BadBody(Status::InvalidArgument("the body is not a JSON object"));
  if (route.subresource == "binding") {
    std::string target = GetString(doc, "target.name");
    if (target.empty()) {
      return StatusResponse(
          422, "Invalid",
          fmt::format("Binding \"{}\" is invalid: target.name: Required value", route.name));
    }
    auto bound = store_.BindPod(route.ns, route.name, target);
    if (!bound.ok())
      return ErrorFromStatus(bound.status(), route);
    return StatusResponse(201, "", "", "", "");
  }
  if (route.subresource == "eviction") {
    // kubectl drain --dry-run=server puts the dry run in the Eviction's deleteOptions.
    bool body_dry_run = false;
    if (const rapidjson::Value* dry = Find(doc, "deleteOptions.dryRun"); dry && dry->IsArray()) {
      for (const auto& v : dry->GetArray())
        body_dry_run = body_dry_run || (v.IsString() && std::string_view(v.GetString()) == "All");
    }
    return EvictPod(store_, route, doc,
                    body_dry_run || Truthy(request.query, "dryRun") ||
                        QueryValue(request.query, "dryRun") == "All");
  }
  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  std::string body_ns = GetString(doc, "metadata.namespace");
  if (def->namespaced && !route.ns.empty() && !body_ns.empty() && body_ns != route.ns) {
    return StatusResponse(400, "BadRequest",
                          "the namespace of the provided object does not match the namespace sent "
                          "on the request");
  }
  std::string kind = GetString(doc, "kind");
  if (!kind.empty() && kind != def->kind) {
    return StatusResponse(
        400, "BadRequest",
        fmt::format("the kind of the provided object ({}) does not match the resource {} ({})",
                    kind, route.resource, def->kind));
  }
  std::vector<std::string> warnings;
  if (auto refused = ApplyFieldValidation(request, SchemaTypeFor(route.group, route.resource),
                                          def->kind, route.version, false, doc, warnings))
    return *refused;
  ReplaceInvalidUtf8(doc, doc.GetAllocator());
  if (route.group == "events.k8s.io")
    RenameMembers(doc, false);
  std::string name = GetString(doc, "metadata.name");
  Route named = route;
  named.name = name;
  PrepareNamespace(*def, route.ns, doc);
  // Mutating admission (DefaultTolerationSeconds) runs before validation, as upstream.
  if (auto refused = AdmitCreate(store_, admission_, route, doc))
    return *refused;
  DefaultWorkload(route.resource, doc);
  if (auto refused = CheckRbacWrite(store_, request, route, doc, nullptr))
    return *refused;
  if (FieldErrors errors = ValidateCreate(route.group, route.resource, doc); !errors.empty())
    return InvalidResponse(def->kind, route.group, name, errors);
  if (auto refused = AdmitWorkloadCreate(store_, route.resource, doc))
    return *refused;
  if (auto refused = AdmitPodSecurity(store_, route.resource, doc, warnings))
    return *refused;
  if (route.resource == "poddisruptionbudgets") {
    if (Status s = ValidatePodDisruptionBudget(doc); !s.ok())
      return ErrorFromStatus(s, named);
  }
  auto& a = doc.GetAllocator();
  if (doc.HasMember("apiVersion"))
    doc.RemoveMember("apiVersion");
  doc.AddMember(
      "apiVersion",
      rapidjson::Value(
          route.group == "events.k8s.io" ? "v1" : GroupVersion(route.group, route.version).c_str(),
          a),
      a);
  if (!doc.HasMember("kind"))
    doc.AddMember("kind", rapidjson::Value(def->kind.c_str(), a), a);
  // Upstream's dry-run storage never reaches the etcd3 check that refuses a
  // resourceVersion on create.
  if (QueryValue(request.query, "dryRun") != "All") {
    if (auto refused = RefuseResourceVersionOnCreate(doc))
      return *refused;
  }
  if (Find(doc, "metadata.resourceVersion") != nullptr)
    doc["metadata"].RemoveMember("resourceVersion");
  WriteContext context = WriteContextOf(request, route, store_);
  if (request.content_type.find("apply-patch") != std::string::npos) {
    rapidjson::Document applied(rapidjson::kObjectType);
    if (Status s = ServerSideApply(applied, doc, true, context); !s.ok())
      return ErrorFromStatus(s, named);
    doc.Swap(applied);
  } else {
    TrackUpdate(nullptr, doc, context);
  }
  auto created = store_.Create(route.resource, route.ns, std::move(doc));
  if (!created.ok())
    return ErrorFromStatus(created.status(), named);
  if (route.resource == "namespaces")  // the ServiceAccount and root-CA controllers
    SyncNamespaceDefaults(store_, admission_.root_ca_pem, GetString(**created, "metadata.name"));
  ApiResponse response = JsonResponse(201, RenderObject(**created, route.group));
  AddWarningHeaders(response, warnings);
  return response;
}

ApiResponse Api::Update(const ApiRequest& request, const Route& route) {
  auto parsed = ParseBody(request);
  if (!parsed.ok())
    return BadBody(parsed.status());
  rapidjson::Document& doc = **parsed;
  if (!doc.IsObject())
    return BadBody(Status::InvalidArgument("the body is not a JSON object"));
  std::string name = GetString(doc, "metadata.name");
  if (!name.empty() && name != route.name) {
    return StatusResponse(400, "BadRequest",
                          "the name of the object does not match the name on the URL");
  }
  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  std::vector<std::string> warnings;
  if (auto refused = ApplyFieldValidation(request, SchemaTypeFor(route.group, route.resource),
                                          def->kind, route.version, false, doc, warnings))
    return *refused;
  ReplaceInvalidUtf8(doc, doc.GetAllocator());
  if (route.group == "events.k8s.io")
    RenameMembers(doc, false);
  if (route.subresource.empty())
    DefaultWorkload(route.resource, doc);
  if (auto current = store_.Get(route.resource, route.ns, route.name); current.ok()) {
    if (auto refused = CheckRbacWrite(store_, request, route, doc, current->get()))
      return *refused;
    if (route.subresource.empty())
      KeepAllocatedValues(route.resource, doc, **current);
    if (auto invalid = ValidateAgainstStored(route, doc, **current))
      return *invalid;
    if (route.subresource.empty())
      WarnPodSecurityOfTemplate(store_, route.resource, doc, warnings);
    TrackUpdate(current->get(), doc, WriteContextOf(request, route, store_));
  }
  if (route.resource == "poddisruptionbudgets" && route.subresource.empty()) {
    if (Status s = ValidatePodDisruptionBudget(doc); !s.ok())
      return ErrorFromStatus(s, route);
  }
  auto updated = store_.Update(route.resource, route.ns, route.name, std::move(doc),
                               route.subresource == "status");
  if (!updated.ok())
    return ErrorFromStatus(updated.status(), route);
  ApiResponse response = JsonResponse(200, RenderObject(**updated, route.group));
  AddWarningHeaders(response, warnings);
  return response;
}

namespace {

// `patch` of content `type` applied to `next`. kConflict: a failed json-patch test, or
// an apply conflict.
Status PatchDocument(const std::string& type, rapidjson::Document& next,
                     const rapidjson::Value& patch, const ApiRequest& request, const Route& route,
                     const Store& store, std::vector<ApplyConflict>& conflicts) {
  if (type == "application/json-patch+json")
    return ApplyJsonPatch(next, patch);
  if (!patch.IsObject())
    return Status::InvalidArgument(fmt::format("a {} body must be a JSON object", type));
  if (type == "application/merge-patch+json") {
    ApplyMergePatch(next, patch, next.GetAllocator());
    return Status::Ok();
  }
  if (type == "application/apply-patch+yaml") {
    return ServerSideApply(next, patch, Truthy(request.query, "force"),
                           WriteContextOf(request, route, store), &conflicts);
  }
  return ApplyStrategicMergePatch(next, patch, next.GetAllocator());
}

// errors.NewApplyConflict: 409 Conflict whose details hold only the causes.
ApiResponse ApplyConflictResponse(const Status& s, const std::vector<ApplyConflict>& conflicts) {
  ApiResponse r = StatusResponse(409, "Conflict", s.message());
  auto doc = ParseJson(r.body);
  if (!doc.ok())
    return r;
  auto& a = (*doc)->GetAllocator();
  rapidjson::Value causes(rapidjson::kArrayType);
  for (const ApplyConflict& c : conflicts) {
    rapidjson::Value cause(rapidjson::kObjectType);
    cause.AddMember("reason", "FieldManagerConflict", a);
    cause.AddMember("message", rapidjson::Value(c.message.c_str(), a), a);
    cause.AddMember("field", rapidjson::Value(c.field.c_str(), a), a);
    causes.PushBack(cause, a);
  }
  SetMember(**doc, "details.causes", std::move(causes));
  r.body = ToJson(**doc);
  return r;
}

}  // namespace

ApiResponse Api::Patch(const ApiRequest& request, const Route& route) {
  std::string type = request.content_type.substr(0, request.content_type.find(';'));
  while (!type.empty() && type.back() == ' ')
    type.pop_back();
  bool apply = type == "application/apply-patch+yaml";
  if (type != "application/merge-patch+json" && type != "application/json-patch+json" &&
      type != "application/strategic-merge-patch+json" && !apply) {
    return StatusResponse(415, "UnsupportedMediaType",
                          fmt::format("the body of the request was in an unknown format - accepted "
                                      "media types include: application/json-patch+json, "
                                      "application/merge-patch+json, application/apply-patch+yaml, "
                                      "application/strategic-merge-patch+json"));
  }
  std::string manager = QueryValue(request.query, "fieldManager");
  if (apply && manager.empty()) {
    return StatusResponse(422, "Invalid",
                          "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                          "is required for apply patch");
  }
  auto patch = apply ? YamlToJson(request.body) : ParseJson(request.body);
  if (!patch.ok())
    return BadBody(patch.status());
  rapidjson::Document& p = **patch;
  if (route.group == "events.k8s.io" && p.IsObject())
    RenameMembers(p, false);
  std::vector<std::string> warnings;
  for (int attempt = 0; attempt < 10; ++attempt) {
    warnings.clear();
    auto current = store_.Get(route.resource, route.ns, route.name);
    if (!current.ok()) {
      if (apply && current.status().code() == Status::Code::kNotFound && p.IsObject()) {
        ApiRequest create = request;
        create.content_type = "application/json; apply-patch";  // Create records "Apply"
        rapidjson::Document copy;
        copy.CopyFrom(p, copy.GetAllocator());
        if (route.group == "events.k8s.io")
          RenameMembers(copy, true);
        create.body = ToJson(copy);
        Route r = route;
        r.verb = "create";
        r.name.clear();
        return Create(create, r);
      }
      return ErrorFromStatus(current.status(), route);
    }
    std::string base_rv = GetString(**current, "metadata.resourceVersion");
    auto next = Clone(**current);
    auto& a = next->GetAllocator();
    std::vector<ApplyConflict> conflicts;
    Status s = PatchDocument(type, *next, p, request, route, store_, conflicts);
    if (s.code() == Status::Code::kConflict && type == "application/json-patch+json")
      return StatusResponse(422, "Invalid", s.message(), route.resource, route.name, route.group);
    if (s.code() == Status::Code::kConflict)
      return ApplyConflictResponse(s, conflicts);
    if (!s.ok())
      return StatusResponse(422, "Invalid", s.message(), route.resource, route.name);
    if (!next->IsObject())
      return StatusResponse(422, "Invalid", "the patch removed the object");
    if (auto refused = CheckRbacWrite(store_, request, route, *next, current->get()))
      return *refused;
    if (auto refused = CheckPatchedObject(request, route, *next, **current, warnings))
      return *refused;
    if (!apply)
      TrackUpdate(current->get(), *next, WriteContextOf(request, route, store_));
    // A resourceVersion put in by the patch is a precondition; otherwise retry races.
    std::string patched_rv = GetString(*next, "metadata.resourceVersion");
    bool client_precondition = patched_rv != base_rv;
    if (!client_precondition)
      SetMember(*next, "metadata.resourceVersion", rapidjson::Value(base_rv.c_str(), a));
    auto updated = store_.Update(route.resource, route.ns, route.name, std::move(*next),
                                 route.subresource == "status");
    if (updated.ok()) {
      ApiResponse response = JsonResponse(200, RenderObject(**updated, route.group));
      AddWarningHeaders(response, warnings);
      return response;
    }
    if (updated.status().code() == Status::Code::kConflict && !client_precondition)
      continue;
    return ErrorFromStatus(updated.status(), route);
  }
  return StatusResponse(409, "Conflict", "the object kept changing during the patch; try again",
                        route.resource, route.name);
}

namespace {

// DeleteOptions from the body, or when there is none from the query (the handler in
// k8s.io/apiserver/pkg/endpoints/handlers/delete.go decodes one or the other).
// The bool is orphanDependents=false, for the 202 of a pending delete.
Result<std::pair<DeleteOptions, bool>> DeleteOptionsFromBody(const std::string& body) {
  DeleteOptions options;
  auto parsed = ParseJson(body);
  if (!parsed.ok())
    return parsed.status();
  const rapidjson::Value& d = **parsed;
  if (!d.IsObject())
    return std::make_pair(options, false);
  if (d.HasMember("gracePeriodSeconds") && d["gracePeriodSeconds"].IsInt64())
    options.grace_period_seconds = d["gracePeriodSeconds"].GetInt64();
  std::string uid = GetString(d, "preconditions.uid");
  if (!uid.empty())
    options.precondition_uid = uid;
  std::string rv = GetString(d, "preconditions.resourceVersion");
  if (!rv.empty())
    options.precondition_resource_version = rv;
  const rapidjson::Value* orphan = Find(d, "orphanDependents");
  if (orphan != nullptr && orphan->IsBool())
    options.orphan_dependents = orphan->GetBool();
  std::string policy = GetString(d, "propagationPolicy");
  if (!policy.empty())
    options.propagation_policy = policy;
  return std::make_pair(options, options.orphan_dependents == false);
}

Result<std::pair<DeleteOptions, bool>> DeleteOptionsFromQuery(
    const std::map<std::string, std::string>& query) {
  DeleteOptions options;
  std::string grace = QueryValue(query, "gracePeriodSeconds");
  if (!grace.empty()) {
    char* end = nullptr;
    long long g = std::strtoll(grace.c_str(), &end, 10);
    if (end == grace.c_str() || *end != '\0') {
      return Status::InvalidArgument(
          fmt::format("gracePeriodSeconds \"{}\" is not a number", grace));
    }
    options.grace_period_seconds = g;
  }
  if (!QueryValue(query, "propagationPolicy").empty())
    options.propagation_policy = QueryValue(query, "propagationPolicy");
  if (!QueryValue(query, "orphanDependents").empty())
    options.orphan_dependents = QueryValue(query, "orphanDependents") == "true";
  return std::make_pair(options, options.orphan_dependents == false);
}

Result<std::pair<DeleteOptions, bool>> ParseDeleteOptions(const ApiRequest& request) {
  auto options = request.body.empty() ? DeleteOptionsFromQuery(request.query)
                                      : DeleteOptionsFromBody(request.body);
  if (!options.ok())
    return options;
  if (Status s = ValidatePropagation(options->first); !s.ok()) {
    return Status::InvalidArgument(
        fmt::format("DeleteOptions.meta.k8s.io \"\" is invalid: {}", s.message()));
  }
  return options;
}

// Bad JSON is 400; options that decode but do not validate are 422, as upstream.
ApiResponse BadDeleteOptions(const Status& s) {
  if (s.message().rfind("DeleteOptions.meta.k8s.io", 0) == 0)
    return StatusResponse(422, "Invalid", s.message(), "DeleteOptions", "", "meta.k8s.io");
  return BadBody(s);
}

}  // namespace

ApiResponse Api::Delete(const ApiRequest& request, const Route& route) {
  auto options = ParseDeleteOptions(request);
  if (!options.ok())
    return BadDeleteOptions(options.status());
  auto deleted = store_.Delete(route.resource, route.ns, route.name, options->first);
  if (!deleted.ok())
    return ErrorFromStatus(deleted.status(), route);
  // Kubernetes answers 202 only for a pending delete with orphanDependents=false.
  int code = (!deleted->removed && options->second) ? 202 : 200;
  // A delete that finalizers hold answers with the object, as upstream.
  if (route.resource == "pods" || route.resource == "namespaces" || !deleted->removed) {
    return JsonResponse(code, RenderObject(*deleted->object, route.group));
  }
  ApiResponse r = StatusResponse(code, "", "", route.resource, route.name, route.group);
  // Success Status carries the uid of what was deleted, as Kubernetes' does.
  auto doc = ParseJson(r.body);
  if (doc.ok()) {
    SetMember(**doc, "details.uid",
              rapidjson::Value(GetString(*deleted->object, "metadata.uid").c_str(),
                               (*doc)->GetAllocator()));
    r.body = ToJson(**doc);
  }
  return r;
}

ApiResponse Api::DeleteCollection(const ApiRequest& request, const Route& route) {
  ApiResponse error;
  auto selectors = ParseSelectors(request, route, error);
  if (!selectors)
    return error;
  auto options = ParseDeleteOptions(request);
  if (!options.ok())
    return BadDeleteOptions(options.status());
  ListResult result = store_.List(route.resource, route.ns,
                                  [&](const rapidjson::Value& v) { return selectors->Matches(v); });
  std::string items;
  for (const auto& obj : result.items) {
    auto deleted = store_.Delete(route.resource, GetString(*obj, "metadata.namespace"),
                                 GetString(*obj, "metadata.name"), options->first);
    if (!deleted.ok())
      continue;  // raced with another delete
    if (!items.empty())
      items += ",";
    items += RenderObject(*deleted->object, route.group);
  }
  return JsonResponse(
      200, fmt::format(R"({{"kind":"{}","apiVersion":"{}","metadata":{{}},"items":[{}]}})",
                       ListKind(route), GroupVersion(route.group, route.version), items));
}

void Api::Watch(const ApiRequest& request, const Route& route, const WatchHooks& hooks) {
  ApiResponse error;
  auto selectors = ParseSelectors(request, route, error);
  if (!selectors)
    return hooks.fail(error);
  std::string rv_text = QueryValue(request.query, "resourceVersion");
  bool bookmarks = Truthy(request.query, "allowWatchBookmarks");
  bool initial_events_end = Truthy(request.query, "sendInitialEvents") && bookmarks;
  long long timeout_seconds = 1800;
  std::string timeout_text = QueryValue(request.query, "timeoutSeconds");
  if (!timeout_text.empty())
    timeout_seconds = std::strtoll(timeout_text.c_str(), nullptr, 10);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);

  const ResourceDef* def = FindDef(route.group, route.version, route.resource);
  const bool table = WantsTable(request.accept);
  bool columns_sent = false;
  auto event_line = [&](const char* type, const rapidjson::Value& object) {
    std::string rendered;
    if (table) {
      // The first event carries the column definitions, as in Kubernetes.
      rendered = RenderTable(route.resource, route.group, {&object}, "", "", !columns_sent,
                             store_.clock().WallNow());
      columns_sent = true;
    } else {
      rendered = RenderObject(object, route.group);
    }
    return fmt::format(R"({{"type":"{}","object":{}}})", type, rendered) + "\n";
  };
  auto bookmark_line = [&](uint64_t rv, bool initial_end) {
    std::string annotations =
        initial_end ? R"(,"annotations":{"k8s.io/initial-events-end":"true"})" : "";
    return fmt::format(
               R"({{"type":"BOOKMARK","object":{{"kind":"{}","apiVersion":"{}","metadata":{{"resourceVersion":"{}"{}}}}}}})",
               def->kind, GroupVersion(route.group, route.version), rv, annotations) +
           "\n";
  };

  std::vector<std::string> backlog;
  std::unique_ptr<Watcher> watcher;
  if (rv_text.empty() || rv_text == "0") {
    ListResult initial = store_.List(
        route.resource, route.ns, [&](const rapidjson::Value& v) { return selectors->Matches(v); });
    for (const auto& obj : initial.items)
      backlog.push_back(event_line("ADDED", *obj));
    auto w = store_.Watch(route.resource, route.ns, initial.resource_version);
    if (!w.ok())
      return hooks.fail(ErrorFromStatus(w.status(), route));
    watcher = std::move(*w);
    if (initial_events_end)
      backlog.push_back(bookmark_line(initial.resource_version, true));
  } else {
    if (rv_text.find_first_not_of("0123456789") != std::string::npos) {
      return hooks.fail(StatusResponse(400, "BadRequest",
                                       fmt::format("invalid resource version \"{}\"", rv_text)));
    }
    auto w = store_.Watch(route.resource, route.ns, std::strtoull(rv_text.c_str(), nullptr, 10));
    if (!w.ok())
      return hooks.fail(ErrorFromStatus(w.status(), route));
    watcher = std::move(*w);
  }
  hooks.begin();
  for (const auto& line : backlog) {
    if (!hooks.write(line))
      return;
  }
  auto translate = [&](const Change& c) -> std::string {
    bool now_matches = c.type != ChangeType::kDeleted && selectors->Matches(*c.object);
    bool was_matching = c.previous != nullptr && selectors->Matches(*c.previous);
    switch (c.type) {
      case ChangeType::kAdded:
        return now_matches ? event_line("ADDED", *c.object) : "";
      case ChangeType::kModified:
        if (now_matches && was_matching)
          return event_line("MODIFIED", *c.object);
        if (now_matches)
          return event_line("ADDED", *c.object);
        if (was_matching)
          return event_line("DELETED", *c.object);
        return "";
      case ChangeType::kDeleted:
        return selectors->Matches(*c.object) ? event_line("DELETED", *c.object) : "";
    }
    return "";
  };
  if (hooks.expire_after_backlog) {
    // Hand out what has happened already, then the mid-stream 410.
    while (true) {
      auto next = watcher->Next(std::chrono::milliseconds(0));
      if (!next.ok() || !next->has_value())
        break;
      std::string line = translate(**next);
      if (!line.empty() && !hooks.write(line))
        return;
    }
    hooks.write(fmt::format(R"({{"type":"ERROR","object":{}}})",
                            StatusJson(410, "Expired",
                                       fmt::format("too old resource version: {} ({})",
                                                   rv_text.empty() ? "0" : rv_text,
                                                   store_.CurrentResourceVersion()))) +
                "\n");
    return;
  }
  // Bookmarks as the watch cache sends them: every bookmark_interval, and one 2 s
  // before the watch's timeout (cacher.go's nextBookmarkTime).
  auto next_bookmark = [&](std::chrono::steady_clock::time_point from) {
    auto next = from + hooks.bookmark_interval;
    auto before_timeout = deadline - std::chrono::seconds(2);
    return before_timeout > from && before_timeout < next ? before_timeout : next;
  };
  auto bookmark_at = next_bookmark(std::chrono::steady_clock::now());
  while (!hooks.stopping()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return;
    if (hooks.stalled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto wait = std::min<std::chrono::steady_clock::duration>(
        {deadline - now, std::chrono::milliseconds(200),
         std::max<std::chrono::steady_clock::duration>(bookmark_at - now, {})});
    auto next = watcher->Next(std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    if (!next.ok()) {
      hooks.write(fmt::format(R"({{"type":"ERROR","object":{}}})",
                              StatusJson(410, "Expired", next.status().message())) +
                  "\n");
      return;
    }
    if (next->has_value()) {
      std::string line = translate(**next);
      if (line.empty())
        continue;
      if (!hooks.write(line))
        return;
    }
    if (bookmarks && std::chrono::steady_clock::now() >= bookmark_at) {
      if (!hooks.write(bookmark_line(watcher->position(), false)))
        return;
      bookmark_at = next_bookmark(std::chrono::steady_clock::now());
    }
  }
}

}  // namespace kubesim
