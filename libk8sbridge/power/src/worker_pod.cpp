#include "k8sbridge/power/worker_pod.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/slurm/constraint.h"

namespace k8sbridge::power {

namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;
using Requirements = std::vector<conf::LabelRequirement>;

Value Str(std::string_view s, Allocator& a) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// The member `name` of `object`, created as `type` if absent or null. Adding a
// member to `object` may move its other members: look them up again afterwards.
Value& Child(Value& object, std::string_view name, rapidjson::Type type, Allocator& a) {
  auto it = object.FindMember(Str(name, a));
  if (it == object.MemberEnd()) {
    object.AddMember(Str(name, a), Value(type), a);
    return (object.MemberEnd() - 1)->value;
  }
  if (it->value.IsNull())
    it->value = Value(type);
  return it->value;
}

void SetString(Value& object, std::string_view name, std::string_view value, Allocator& a) {
  auto it = object.FindMember(Str(name, a));
  if (it != object.MemberEnd()) {
    it->value = Str(value, a);
  } else {
    object.AddMember(Str(name, a), Str(value, a), a);
  }
}

Value Expression(const conf::LabelRequirement& r, Allocator& a) {
  Value e(rapidjson::kObjectType);
  e.AddMember("key", Str(r.key, a), a);
  e.AddMember("operator", Str(conf::OperatorName(r.op), a), a);
  if (r.op == conf::LabelRequirement::Op::kIn || r.op == conf::LabelRequirement::Op::kNotIn) {
    Value values(rapidjson::kArrayType);
    values.PushBack(Str(r.value, a), a);
    e.AddMember("values", values, a);
  }
  return e;
}

std::string JoinIds(const std::vector<const ResumeJob*>& jobs) {
  std::string out;
  for (const ResumeJob* job : jobs)
    out += (out.empty() ? "" : ",") + std::to_string(job->job_id);
  return out;
}

// The label requirements of the node's jobs: one list per alternative (OR), or
// none when the pod is unconstrained.
Result<std::vector<Requirements>> PlacementRules(const conf::BridgeConfig& config,
                                                 const WorkerPodRequest& request, Logger& log) {
  // Each job's constraint must hold on the node: AND them.
  std::vector<std::vector<std::string>> combined{{}};
  for (const ResumeJob* job : request.jobs) {
    if (job->features.empty())
      continue;
    auto parsed = slurm::ParseConstraint(job->features);
    if (!parsed.ok()) {
      return parsed.status().WithContext(fmt::format("job {}", job->job_id));
    }
    for (const std::string& note : parsed->notes) {
      log.Warning("node {}: job {}: {}", request.node, job->job_id, note);
    }
    if (parsed->alternatives.empty())
      continue;
    std::vector<std::vector<std::string>> product;
    for (const auto& a : combined) {
      for (const auto& b : parsed->alternatives) {
        auto both = a;
        both.insert(both.end(), b.begin(), b.end());
        product.push_back(std::move(both));
      }
    }
    combined = std::move(product);
  }
  std::vector<Requirements> rules;
  std::set<std::string> reported;
  for (const auto& alternative : combined) {
    Requirements requirements;
    for (const std::string& feature : alternative) {
      if (const conf::FeatureMapping* mapping = config.MappingOf(feature)) {
        requirements.insert(requirements.end(), mapping->selector.begin(), mapping->selector.end());
      } else if (!config.node_features.label_prefix.empty()) {
        requirements.push_back(
            {config.node_features.label_prefix + feature, conf::LabelRequirement::Op::kIn, "true"});
      } else if (reported.insert(feature).second) {
        log.Debug(
            "node {}: feature '{}' has no Feature= mapping: it constrains Slurm's choice "
            "of node only, not the pod",
            request.node, feature);
      }
    }
    // An alternative without requirements is met by any Kubernetes node, and so is
    // the whole OR.
    if (requirements.empty())
      return std::vector<Requirements>{};
    Requirements unique;
    for (auto& r : requirements) {
      if (std::find(unique.begin(), unique.end(), r) == unique.end())
        unique.push_back(r);
    }
    rules.push_back(std::move(unique));
  }
  return rules;
}

Status ApplyPlacementRules(Value& spec, const std::vector<Requirements>& rules,
                           const WorkerPodRequest& request, const PodTemplate& tmpl, Allocator& a) {
  if (rules.empty())
    return Status::Ok();
  Requirements expressions;  // what the nodeSelector cannot express
  if (rules.size() == 1) {
    bool had_selector = spec.HasMember("nodeSelector");
    Value& selector = Child(spec, "nodeSelector", rapidjson::kObjectType, a);
    std::map<std::string, std::string> needed;
    for (const conf::LabelRequirement& r : rules[0]) {
      if (r.op != conf::LabelRequirement::Op::kIn) {
        expressions.push_back(r);
        continue;
      }
      auto [it, inserted] = needed.emplace(r.key, r.value);
      if (!inserted && it->second != r.value) {
        return Status::InvalidArgument(fmt::format(
            "node {}: the features of jobs {} need label {} to be both '{}' and '{}': no "
            "Kubernetes node can have both; fix the Feature= mappings or the job's --constraint",
            request.node, JoinIds(request.jobs), r.key, it->second, r.value));
      }
      auto existing = selector.FindMember(Str(r.key, a));
      if (existing != selector.MemberEnd()) {
        if (!existing->value.IsString() || existing->value.GetString() != r.value) {
          return Status::InvalidArgument(fmt::format(
              "node {}: pod template {} sets spec.nodeSelector.{} to '{}', but the jobs' "
              "features need '{}': remove it from the template or map the feature differently",
              request.node, tmpl.file, r.key,
              existing->value.IsString() ? existing->value.GetString() : "?", r.value));
        }
        continue;
      }
      selector.AddMember(Str(r.key, a), Str(r.value, a), a);
    }
    if (!had_selector && selector.ObjectEmpty())
      spec.EraseMember("nodeSelector");
    if (expressions.empty())
      return Status::Ok();
  }
  std::vector<Requirements> terms =
      rules.size() == 1 ? std::vector<Requirements>{expressions} : rules;

  Value& affinity = Child(spec, "affinity", rapidjson::kObjectType, a);
  Value& node_affinity = Child(affinity, "nodeAffinity", rapidjson::kObjectType, a);
  Value& required = Child(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution",
                          rapidjson::kObjectType, a);
  Value& existing_terms = Child(required, "nodeSelectorTerms", rapidjson::kArrayType, a);
  // Kubernetes ORs nodeSelectorTerms: to AND ours with the template's, every
  // template term is combined with every one of ours.
  Value old_terms(rapidjson::kArrayType);
  old_terms.Swap(existing_terms);
  if (old_terms.Empty())
    old_terms.PushBack(Value(rapidjson::kObjectType), a);
  for (Value& old_term : old_terms.GetArray()) {
    for (const Requirements& term : terms) {
      Value combined;
      combined.CopyFrom(old_term, a);
      if (!combined.IsObject())
        combined.SetObject();
      Value& match = Child(combined, "matchExpressions", rapidjson::kArrayType, a);
      for (const conf::LabelRequirement& r : term)
        match.PushBack(Expression(r, a), a);
      existing_terms.PushBack(combined, a);
    }
  }
  return Status::Ok();
}

void SetEnv(Value& container, std::string_view name, Value value_fields, Allocator& a) {
  Value& env = Child(container, "env", rapidjson::kArrayType, a);
  for (rapidjson::SizeType i = 0; i < env.Size(); ++i) {
    if (kube::StringMember(&env[i], "name") == name) {
      env.Erase(env.Begin() + i);
      break;
    }
  }
  Value entry(rapidjson::kObjectType);
  entry.AddMember("name", Str(name, a), a);
  for (auto& m : value_fields.GetObject())
    entry.AddMember(m.name, m.value, a);
  env.PushBack(entry, a);
}

void SetEnvValue(Value& container, std::string_view name, std::string_view value, Allocator& a) {
  Value fields(rapidjson::kObjectType);
  fields.AddMember("value", Str(value, a), a);
  SetEnv(container, name, std::move(fields), a);
}

void SetEnvField(Value& container, std::string_view name, std::string_view field_path,
                 Allocator& a) {
  Value field_ref(rapidjson::kObjectType);
  field_ref.AddMember("fieldPath", Str(field_path, a), a);
  Value value_from(rapidjson::kObjectType);
  value_from.AddMember("fieldRef", field_ref, a);
  Value fields(rapidjson::kObjectType);
  fields.AddMember("valueFrom", value_from, a);
  SetEnv(container, name, std::move(fields), a);
}

// The labels k8sbridge finds its pods by, and the annotations naming the jobs.
void SetWorkerMetadata(Value& metadata, const conf::BridgeConfig& config,
                       const conf::NodeGroup& group, const WorkerPodRequest& request,
                       const std::string& job_ids, Allocator& a) {
  SetString(metadata, "name", request.node, a);
  SetString(metadata, "namespace", config.kube.namespace_, a);
  Value& labels = Child(metadata, "labels", rapidjson::kObjectType, a);
  SetString(labels, contract::kManagedByLabel, contract::kManagedByValue, a);
  SetString(labels, contract::kClusterLabel, config.cluster_name, a);
  SetString(labels, contract::kNodeLabel, request.node, a);
  SetString(labels, contract::kNodeGroupLabel, group.name, a);
  if (!request.jobs.empty()) {
    SetString(labels, contract::kJobLabel, std::to_string(request.jobs.front()->job_id), a);
  }
  Value& annotations = Child(metadata, "annotations", rapidjson::kObjectType, a);
  SetString(annotations, contract::kJobIdsAnnotation, job_ids, a);
  std::string features;
  for (const ResumeJob* job : request.jobs) {
    if (!job->features.empty()) {
      features +=
          (features.empty() ? "" : "; ") + fmt::format("{}: {}", job->job_id, job->features);
    }
  }
  if (!features.empty())
    SetString(annotations, contract::kFeaturesAnnotation, features, a);
}

// One job on several nodes: keep its pods in one placement domain.
void AddJobPodAffinity(Value& metadata, Value& spec, const conf::BridgeConfig& config,
                       const conf::NodeGroup& group, const WorkerPodRequest& request,
                       Allocator& a) {
  const ResumeJob* multi_node = nullptr;
  for (const ResumeJob* job : request.jobs) {
    if (job->nodes_alloc.size() > 1) {
      multi_node = job;
      break;
    }
  }
  if (!multi_node || group.placement_label.empty() ||
      group.placement_affinity == conf::PlacementAffinity::kNone) {
    return;
  }
  std::string job_id = std::to_string(multi_node->job_id);
  SetString(Child(metadata, "labels", rapidjson::kObjectType, a), contract::kJobLabel, job_id, a);
  Value match_labels(rapidjson::kObjectType);
  match_labels.AddMember(Str(contract::kClusterLabel, a), Str(config.cluster_name, a), a);
  match_labels.AddMember(Str(contract::kJobLabel, a), Str(job_id, a), a);
  Value selector(rapidjson::kObjectType);
  selector.AddMember("matchLabels", match_labels, a);
  Value term(rapidjson::kObjectType);
  term.AddMember("labelSelector", selector, a);
  term.AddMember("topologyKey", Str(group.placement_label, a), a);
  Value& affinity = Child(spec, "affinity", rapidjson::kObjectType, a);
  Value& pod_affinity = Child(affinity, "podAffinity", rapidjson::kObjectType, a);
  if (group.placement_affinity == conf::PlacementAffinity::kRequired) {
    Child(pod_affinity, "requiredDuringSchedulingIgnoredDuringExecution", rapidjson::kArrayType, a)
        .PushBack(term, a);
  } else {
    Value weighted(rapidjson::kObjectType);
    weighted.AddMember("weight", 100, a);
    weighted.AddMember("podAffinityTerm", term, a);
    Child(pod_affinity, "preferredDuringSchedulingIgnoredDuringExecution", rapidjson::kArrayType, a)
        .PushBack(weighted, a);
  }
}

// The group's Gpus=, else the node's Gres, as requests and limits of the GPU resource.
Status SetGpuResources(Value& container, const conf::BridgeConfig& config,
                       const conf::NodeGroup& group, const WorkerPodRequest& request,
                       Allocator& a) {
  int gpus = 0;
  if (group.gpus) {
    gpus = *group.gpus;
  } else {
    auto from_gres = slurm::GpusFromGres(request.gres);
    if (!from_gres.ok()) {
      return from_gres.status().WithContext(fmt::format(
          "node {} (set Gpus= on NodeGroup={} to override the Gres)", request.node, group.name));
    }
    gpus = *from_gres;
  }
  if (gpus > 0) {
    Value& resources = Child(container, "resources", rapidjson::kObjectType, a);
    for (const char* kind : {"requests", "limits"}) {
      SetString(Child(resources, kind, rapidjson::kObjectType, a), config.power.gpu_resource,
                std::to_string(gpus), a);
    }
  }
  return Status::Ok();
}

// What k8sbridge-worker runs and the environment it reads (contract.h).
void SetWorkerCommandAndEnv(Value& container, const conf::BridgeConfig& config,
                            const conf::NodeGroup& group, const WorkerPodRequest& request,
                            const std::string& job_ids, Allocator& a) {
  if (!container.HasMember("command")) {
    Value command(rapidjson::kArrayType);
    command.PushBack(Str(config.worker.command, a), a);
    container.AddMember("command", command, a);
  }
  // A worker that fails (munge key mismatch, no jail, slurmd refusing to start)
  // says why in its last log lines: make them the pod's status message.
  if (!container.HasMember("terminationMessagePolicy"))
    container.AddMember("terminationMessagePolicy", "FallbackToLogsOnError", a);
  SetEnvValue(container, contract::kEnvNodeName, request.node, a);
  SetEnvValue(container, contract::kEnvCluster, config.cluster_name, a);
  SetEnvValue(container, contract::kEnvNodeGroup, group.name, a);
  SetEnvValue(container, contract::kEnvJobIds, job_ids, a);
  if (!config.worker.conf_server.empty())
    SetEnvValue(container, contract::kEnvConfServer, config.worker.conf_server, a);
  SetEnvField(container, contract::kEnvPodName, "metadata.name", a);
  SetEnvField(container, contract::kEnvPodNamespace, "metadata.namespace", a);
  SetEnvField(container, contract::kEnvPodIp, "status.podIP", a);
  SetEnvField(container, contract::kEnvHostNode, "spec.nodeName", a);
  for (const auto& [name, value] : request.extra_env)
    SetEnvValue(container, name, value, a);
}

}  // namespace

Result<kube::Object> RenderWorkerPod(const conf::BridgeConfig& config, const conf::NodeGroup& group,
                                     const PodTemplate& tmpl, const WorkerPodRequest& request,
                                     Logger& log) {
  if (std::string error = conf::Dns1123LabelError(request.node); !error.empty()) {
    return Status::InvalidArgument(
        fmt::format("Slurm node name '{}' cannot be a pod name: {}", request.node, error));
  }
  kube::Object pod;
  rapidjson::Document& doc = pod.mutable_json();
  auto& a = doc.GetAllocator();
  doc.CopyFrom(*tmpl.pod, a);
  doc.AddMember("apiVersion", "v1", a);
  doc.AddMember("kind", "Pod", a);

  Value& metadata = Child(doc, "metadata", rapidjson::kObjectType, a);
  std::string job_ids = JoinIds(request.jobs);
  SetWorkerMetadata(metadata, config, group, request, job_ids, a);
  Value& annotations = metadata["annotations"];
  SetString(annotations, contract::kTemplateHashAnnotation, tmpl.hash, a);
  for (const auto& [key, value] : request.annotations)
    SetString(annotations, key, value, a);

  Value& spec = doc["spec"];
  if (!spec.HasMember("restartPolicy"))
    spec.AddMember("restartPolicy", "Never", a);
  // No automounted token (mode 0644; a template that turns it on is refused): a
  // job's stdio is opened outside the jail, and with allow_no_jail=yes a
  // --no-jail step runs on the pod's root; either could read it. The service
  // account's own automount setting would otherwise decide.
  if (!spec.HasMember("automountServiceAccountToken"))
    spec.AddMember("automountServiceAccountToken", false, a);
  // The runtime (e.g. the NVIDIA container toolkit's) that injects the GPUs'
  // driver: the group's choice over the template's.
  if (!group.runtime_class.empty())
    SetString(spec, "runtimeClassName", group.runtime_class, a);

  auto rules = PlacementRules(config, request, log);
  if (!rules.ok())
    return rules.status().WithContext(fmt::format("node {}", request.node));
  if (Status s = ApplyPlacementRules(spec, *rules, request, tmpl, a); !s.ok())
    return s;
  AddJobPodAffinity(metadata, spec, config, group, request, a);

  Value& container = spec["containers"][static_cast<rapidjson::SizeType>(tmpl.worker_container)];
  if (Status s = SetGpuResources(container, config, group, request, a); !s.ok())
    return s;
  SetWorkerCommandAndEnv(container, config, group, request, job_ids, a);
  return pod;
}

std::string OwnedPodsSelector(std::string_view cluster) {
  return fmt::format("{}={},{}={}", contract::kManagedByLabel, contract::kManagedByValue,
                     contract::kClusterLabel, cluster);
}

std::string NodePodsSelector(std::string_view cluster, std::string_view node) {
  return fmt::format("{},{}={}", OwnedPodsSelector(cluster), contract::kNodeLabel, node);
}

bool IsOwnedWorkerPod(const kube::Object& pod, std::string_view cluster, std::string_view node) {
  auto labels = pod.Labels();
  auto is = [&](std::string_view key, std::string_view value) {
    auto it = labels.find(std::string(key));
    return it != labels.end() && it->second == value;
  };
  return is(contract::kManagedByLabel, contract::kManagedByValue) &&
         is(contract::kClusterLabel, cluster) && is(contract::kNodeLabel, node);
}

ExistingPodVerdict JudgeExistingPod(const kube::Object& pod, std::string_view cluster,
                                    std::string_view node) {
  std::string name = pod.Key();
  if (!IsOwnedWorkerPod(pod, cluster, node)) {
    auto labels = pod.Labels();
    std::string why;
    if (labels[std::string(contract::kManagedByLabel)] != contract::kManagedByValue) {
      why = fmt::format("it lacks the label {}={}", contract::kManagedByLabel,
                        contract::kManagedByValue);
    } else if (labels[std::string(contract::kClusterLabel)] != cluster) {
      why = fmt::format("it belongs to Slurm cluster '{}'",
                        labels[std::string(contract::kClusterLabel)]);
    } else {
      why = fmt::format("its label {} is '{}'", contract::kNodeLabel,
                        labels[std::string(contract::kNodeLabel)]);
    }
    return {ExistingPod::kNotOurs,
            fmt::format("pod {} already exists and is not k8sbridge's worker for node {} of "
                        "cluster {} ({}); k8sbridge never touches such a pod: delete or rename "
                        "it, or rename the Slurm node",
                        name, node, cluster, why)};
  }
  if (pod.IsBeingDeleted()) {
    return {ExistingPod::kReplace, fmt::format("pod {} is terminating", name)};
  }
  std::string phase = kube::pod::Phase(pod);
  if (phase == "Failed" || phase == "Succeeded") {
    std::string detail = pod.String("/status/reason");
    std::string message = pod.String("/status/message");
    if (!message.empty())
      detail += (detail.empty() ? "" : ": ") + message;
    return {ExistingPod::kReplace, fmt::format("pod {} has phase {}{}", name, phase,
                                               detail.empty() ? "" : " (" + detail + ")")};
  }
  if (phase == "Unknown") {
    // The kubelet stopped reporting; deleting on a guess could kill a running
    // node. Slurm's ResumeTimeout and the health checker decide instead.
    return {ExistingPod::kHealthy,
            fmt::format("pod {} has phase Unknown (its kubelet is not reporting); kept", name)};
  }
  return {ExistingPod::kHealthy,
          fmt::format("pod {} exists ({})", name, phase.empty() ? "no status yet" : phase)};
}

}  // namespace k8sbridge::power
