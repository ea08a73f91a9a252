// The fake nodes kubesim starts with: generated (N nodes with GPUs and InfiniBand
// topology labels) or read from a YAML file of Node manifests.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "store.h"

namespace kubesim {

// Label keys of the generated nodes' InfiniBand placement, in the tiered form NVIDIA
// topograph publishes.
inline constexpr const char* kLeafLabel = "network.topology.nvidia.com/leaf";
inline constexpr const char* kSpineLabel = "network.topology.nvidia.com/spine";
inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kGpuCountLabel = "nvidia.com/gpu.count";

struct FakeNodeOptions {
  int count = 4;
  std::string name_prefix = "node-";
  int gpus_per_node = 8;
  std::string gpu_product = "NVIDIA-H100-80GB-HBM3";
  int ib_leaves = 2;  // nodes are spread over leaves in order: leaf-0 gets the first ones
  int ib_spines = 1;
  std::string cpu = "64";
  std::string memory = "512Gi";
  int pods = 110;
};

// Node manifests "node-0" ... with labels kubernetes.io/hostname, kubernetes.io/os,
// kubernetes.io/arch, the GPU product and count, the leaf and spine; capacity and
// allocatable cpu, memory, pods, nvidia.com/gpu; and a Ready=True condition.
std::vector<std::unique_ptr<rapidjson::Document>> MakeFakeNodes(const FakeNodeOptions& options);

// Node manifests from YAML: one or more documents, each a Node or a List of Nodes.
// Missing pieces are filled in: the hostname label, allocatable = capacity, the Ready
// condition, an InternalIP address. kInvalidArgument names the document and the problem.
Result<std::vector<std::unique_ptr<rapidjson::Document>>> LoadNodes(const std::string& yaml_text);

// Completes one node manifest as LoadNodes does.
void CompleteNode(rapidjson::Document& node, int index, const std::string& now);

// Creates the usual namespaces (default, kube-system, kube-public, kube-node-lease).
Status CreateDefaultNamespaces(Store& store);

}  // namespace kubesim
