// The workload controllers of kube-controller-manager, run inside kubesim against the
// store (docs/kubesim.md, "Workloads"):
//
// - StatefulSet (pkg/controller/statefulset): ordinal pods, claims from
//   volumeClaimTemplates, OrderedReady/Parallel, RollingUpdate with partition, OnDelete.
// - Deployment (pkg/controller/deployment) and ReplicaSet (pkg/controller/replicaset).
// - Job (pkg/controller/job) with the job-tracking finalizer, backoff and the
//   SuccessCriteriaMet/Complete, FailureTarget/Failed conditions; the TTL-after-finished
//   controller (pkg/controller/ttlafterfinished).
// - PersistentVolume binding and the hostPath provisioner
//   (pkg/controller/volume/persistentvolume, pkg/volume/hostpath), PVC/PV protection
//   (pkg/controller/volume/pvcprotection, pvprotection).
// - Endpoints (pkg/controller/endpoint) for Services with a selector.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "admission.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "store.h"

namespace kubesim {

struct WorkloadControllerOptions {
  // Provisioned volumes live in <state_dir>/volumes/pvc-<uid> (the kubelet's state dir).
  std::string state_dir = "/run/kubesim";
  // The pods the controllers create get the API server's admission (tolerations).
  AdmissionOptions admission;
  // Job pod backoff after a failure: base * 2^(failures-1), at most 6 min (upstream 10 s).
  std::chrono::milliseconds job_backoff_base{10000};
  std::chrono::milliseconds resync{200};
};

// The StatefulSet controller's view of one set (statefulset_controller.cpp).
struct SetState;
struct SetRange;

class WorkloadControllers {
 public:
  WorkloadControllers(Store& store, k8sbridge::Logger& log, WorkloadControllerOptions options);
  ~WorkloadControllers();
  WorkloadControllers(const WorkloadControllers&) = delete;
  WorkloadControllers& operator=(const WorkloadControllers&) = delete;

  // Creates the default StorageClass, then runs the passes on a thread.
  Status Start();
  void Stop();
  // One pass of every controller (tests call it instead of Start()).
  void RunOnce();

 private:
  void Loop();
  void StatefulSetPass();
  void SyncStatefulSet(const rapidjson::Value& set);
  bool ScaleUpStatefulSet(const rapidjson::Value& set, const SetState& state,
                          const SetRange& range);
  void DeploymentPass();
  void SyncDeployment(const rapidjson::Value& deploy);
  void ReplicaSetPass();
  void SyncReplicaSet(const rapidjson::Value& rs);
  void JobPass();
  void SyncJob(const rapidjson::Value& job);
  void ManageJob(const rapidjson::Value& job, const rapidjson::Value& status, size_t active);
  void VolumePass();
  void EndpointsPass();

  Store& store_;
  k8sbridge::Logger& log_;
  WorkloadControllerOptions options_;
  // Job uid -> when its last pod failure was counted (for the backoff).
  std::map<std::string, std::chrono::steady_clock::time_point> job_last_failure_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// ---- helpers shared by the controllers (workload_controllers.cpp) ----------------------

// The objects of `resource` in `ns` whose controller ownerReference has `owner_uid`.
std::vector<ObjectPtr> OwnedBy(Store& store, const std::string& resource, const std::string& ns,
                               const std::string& owner_uid);
// An ownerReference (controller, blockOwnerDeletion) to `owner` of `kind`.
rapidjson::Value ControllerRef(const rapidjson::Value& owner, const char* api_version,
                               const char* kind, rapidjson::Document::AllocatorType& a);
// A pod from `pod_template` (labels, annotations, spec), owned by `owner`; `name` or,
// when empty, generateName `generate_name`.
std::unique_ptr<rapidjson::Document> PodFromTemplate(const rapidjson::Value& pod_template,
                                                     const rapidjson::Value& owner,
                                                     const char* api_version, const char* kind,
                                                     const std::string& name,
                                                     const std::string& generate_name);
// Creates the pod through the API server's pod admission (default tolerations, Pod
// Security enforce); the error names why it was refused.
Status CreateControllerPod(Store& store, const AdmissionOptions& admission,
                           std::unique_ptr<rapidjson::Document> pod);
// Writes `status` (an object) as the object's .status when it differs.
void WriteStatus(Store& store, const std::string& resource, const rapidjson::Value& object,
                 rapidjson::Document& status);
int64_t IntAt(const rapidjson::Value& object, const char* path, int64_t fallback);
// A new object: apiVersion, kind, metadata.name and (when given) a copy of `labels`.
rapidjson::Document NewObject(const char* api_version, const char* kind, const std::string& name,
                              const rapidjson::Value* labels);

}  // namespace kubesim
