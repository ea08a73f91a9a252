#include "nodes.h"

#include <fmt/format.h>

#include "patch.h"

namespace kubesim {

namespace {

void SetStr(rapidjson::Document& d, const char* path, const std::string& v) {
  SetMember(d, path, rapidjson::Value(v.c_str(), d.GetAllocator()));
}

void SetLabel(rapidjson::Document& d, const std::string& key, const std::string& value) {
  auto& a = d.GetAllocator();
  if (Find(d, "metadata.labels") == nullptr) {
    SetMember(d, "metadata.labels", rapidjson::Value(rapidjson::kObjectType));
  }
  rapidjson::Value& labels = d["metadata"]["labels"];
  if (labels.HasMember(key.c_str()))
    return;
  labels.AddMember(rapidjson::Value(key.c_str(), a), rapidjson::Value(value.c_str(), a), a);
}

}  // namespace

void CompleteNode(rapidjson::Document& node, int index, const std::string& now) {
  auto& a = node.GetAllocator();
  SetStr(node, "apiVersion", "v1");
  SetStr(node, "kind", "Node");
  std::string name = GetString(node, "metadata.name");
  SetLabel(node, "kubernetes.io/hostname", name);
  SetLabel(node, "kubernetes.io/os", "linux");
  SetLabel(node, "kubernetes.io/arch", "amd64");
  if (Find(node, "status.capacity") == nullptr) {
    SetMember(node, "status.capacity", rapidjson::Value(rapidjson::kObjectType));
  }
  rapidjson::Value& capacity = node["status"]["capacity"];
  for (auto [key, value] : {std::pair{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}}) {
    if (!capacity.HasMember(key))
      capacity.AddMember(rapidjson::StringRef(key), rapidjson::StringRef(value), a);
  }
  if (Find(node, "status.allocatable") == nullptr) {
    SetMember(node, "status.allocatable", rapidjson::Value(node["status"]["capacity"], a));
  }
  if (Find(node, "status.conditions") == nullptr) {
    SetCondition(node, "Ready", "True", "KubeletReady", "kubelet is posting ready status", now);
    // Kubernetes' node conditions carry a heartbeat time too.
    auto& c = node["status"]["conditions"][0];
    c.RemoveMember("lastProbeTime");
    c.AddMember("lastHeartbeatTime", rapidjson::Value(now.c_str(), a), a);
  }
  if (Find(node, "status.addresses") == nullptr) {
    rapidjson::Value addresses(rapidjson::kArrayType);
    rapidjson::Value ip(rapidjson::kObjectType);
    ip.AddMember("type", "InternalIP", a);
    ip.AddMember("address", rapidjson::Value(fmt::format("10.231.0.{}", 10 + index).c_str(), a), a);
    addresses.PushBack(ip, a);
    rapidjson::Value host(rapidjson::kObjectType);
    host.AddMember("type", "Hostname", a);
    host.AddMember("address", rapidjson::Value(name.c_str(), a), a);
    addresses.PushBack(host, a);
    SetMember(node, "status.addresses", std::move(addresses));
  }
  if (Find(node, "status.nodeInfo") == nullptr) {
    rapidjson::Value info(rapidjson::kObjectType);
    info.AddMember("kubeletVersion", "v1.32.0-kubesim", a);
    info.AddMember("containerRuntimeVersion", "kubesim://0.1", a);
    info.AddMember("operatingSystem", "linux", a);
    info.AddMember("architecture", "amd64", a);
    info.AddMember("osImage", "kubesim", a);
    info.AddMember("kernelVersion", "6.1.0-kubesim", a);
    // The Python client insists on every field of NodeSystemInfo.
    info.AddMember("kubeProxyVersion", "", a);
    std::string id = fmt::format("{:032x}", std::hash<std::string>{}(name));
    info.AddMember("machineID", rapidjson::Value(id.c_str(), a), a);
    info.AddMember("systemUUID", rapidjson::Value(id.c_str(), a), a);
    info.AddMember("bootID", rapidjson::Value(id.c_str(), a), a);
    SetMember(node, "status.nodeInfo", std::move(info));
  }
}

std::vector<std::unique_ptr<rapidjson::Document>> MakeFakeNodes(const FakeNodeOptions& o) {
  std::vector<std::unique_ptr<rapidjson::Document>> nodes;
  int leaves = std::max(o.ib_leaves, 1);
  int per_leaf = (o.count + leaves - 1) / leaves;
  for (int i = 0; i < o.count; ++i) {
    auto node = std::make_unique<rapidjson::Document>(rapidjson::kObjectType);
    std::string name = fmt::format("{}{}", o.name_prefix, i);
    SetStr(*node, "metadata.name", name);
    int leaf = per_leaf == 0 ? 0 : i / per_leaf;
    int spine = leaf % std::max(o.ib_spines, 1);
    SetLabel(*node, kLeafLabel, fmt::format("leaf-{}", leaf));
    SetLabel(*node, kSpineLabel, fmt::format("spine-{}", spine));
    auto& a = node->GetAllocator();
    rapidjson::Value capacity(rapidjson::kObjectType);
    capacity.AddMember("cpu", rapidjson::Value(o.cpu.c_str(), a), a);
    capacity.AddMember("memory", rapidjson::Value(o.memory.c_str(), a), a);
    capacity.AddMember("pods", rapidjson::Value(std::to_string(o.pods).c_str(), a), a);
    if (o.gpus_per_node > 0) {
      SetLabel(*node, kGpuProductLabel, o.gpu_product);
      SetLabel(*node, kGpuCountLabel, std::to_string(o.gpus_per_node));
      capacity.AddMember("nvidia.com/gpu",
                         rapidjson::Value(std::to_string(o.gpus_per_node).c_str(), a), a);
    }
    SetMember(*node, "status.capacity", std::move(capacity));
    CompleteNode(*node, i, "2026-01-01T00:00:00Z");
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<std::unique_ptr<rapidjson::Document>>> LoadNodes(const std::string& yaml_text) {
  auto docs = YamlDocumentsToJson(yaml_text);
  if (!docs.ok())
    return docs.status().WithContext("nodes file");
  std::vector<std::unique_ptr<rapidjson::Document>> nodes;
  int doc_index = 0;
  for (auto& json : *docs) {
    ++doc_index;
    if (json->IsNull())
      continue;
    if (!json->IsObject()) {
      return Status::InvalidArgument(
          fmt::format("nodes file document {} is not a mapping: list Node manifests", doc_index));
    }
    std::vector<std::unique_ptr<rapidjson::Document>> candidates;
    if (GetString(*json, "kind") == "List" || GetString(*json, "kind") == "NodeList") {
      const rapidjson::Value* items = Find(*json, "items");
      if (items != nullptr && items->IsArray()) {
        for (const auto& item : items->GetArray())
          candidates.push_back(Clone(item));
      }
    } else {
      candidates.push_back(std::move(json));
    }
    for (auto& node : candidates) {
      std::string kind = GetString(*node, "kind");
      if (!kind.empty() && kind != "Node") {
        return Status::InvalidArgument(
            fmt::format("nodes file document {} is a {}, not a Node: list only Node manifests",
                        doc_index, kind));
      }
      if (GetString(*node, "metadata.name").empty()) {
        return Status::InvalidArgument(fmt::format(
            "nodes file document {}: a Node without metadata.name: give every node a name",
            doc_index));
      }
      CompleteNode(*node, static_cast<int>(nodes.size()), "2026-01-01T00:00:00Z");
      nodes.push_back(std::move(node));
    }
  }
  return nodes;
}

Status CreateDefaultNamespaces(Store& store) {
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    rapidjson::Document d(rapidjson::kObjectType);
    SetStr(d, "apiVersion", "v1");
    SetStr(d, "kind", "Namespace");
    SetStr(d, "metadata.name", ns);
    auto created = store.Create("namespaces", "", std::move(d));
    if (!created.ok() && created.status().code() != Status::Code::kAlreadyExists) {
      return created.status();
    }
  }
  return Status::Ok();
}

}  // namespace kubesim
