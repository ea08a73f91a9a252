// The workload resources kubesim serves (apps/v1 statefulsets, deployments,
// replicasets; batch/v1 jobs; v1 persistentvolumeclaims, persistentvolumes, services,
// endpoints; storage.k8s.io/v1 storageclasses) as kube-apiserver handles them:
// defaulting (pkg/apis/apps/v1/defaults.go, pkg/apis/batch/v1/defaults.go,
// pkg/apis/core/v1/defaults.go), validation (pkg/apis/apps/validation,
// pkg/apis/batch/validation, pkg/apis/core/validation), the create-time admission
// (DefaultStorageClass, StorageObjectInUseProtection, the Service IP allocator) and the
// scale subresource. The controllers are in workload_controllers.h.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "api.h"
#include "store.h"
#include "validation.h"

namespace kubesim {

// The default StorageClass kubesim creates at start, and its provisioner (the in-tree
// hostPath provisioner of kube-controller-manager's --enable-hostpath-provisioner).
inline constexpr char kDefaultStorageClass[] = "standard";
inline constexpr char kHostPathProvisioner[] = "kubernetes.io/host-path";
inline constexpr char kIsDefaultClassAnnotation[] = "storageclass.kubernetes.io/is-default-class";
inline constexpr char kPvcProtectionFinalizer[] = "kubernetes.io/pvc-protection";
inline constexpr char kPvProtectionFinalizer[] = "kubernetes.io/pv-protection";
inline constexpr char kJobTrackingFinalizer[] = "batch.kubernetes.io/job-tracking";
// The Service IP range (kube-apiserver's --service-cluster-ip-range default).
inline constexpr char kServiceCidr[] = "10.96.0.0/12";

// Go's %#v of a string map, as field errors print label maps:
// map[string]string{"a":"b", "c":"d"} (keys sorted).
std::string GoStringMap(const rapidjson::Value* labels);

// rand.SafeEncodeString: every byte to one of "bcdfghjklmnpqrstvwxz2456789".
std::string SafeEncodeString(const std::string& text);
// 32-bit FNV-1a.
uint32_t Fnv32a(const std::string& bytes);
// controller.ComputeHash's form: fnv32a over the template (here its compact JSON, not
// Go's deep-hash of the struct) and the collision count, safe-encoded.
std::string PodTemplateHash(const rapidjson::Value& pod_template, int64_t collision_count);

// The defaults the decoder applies to an object of `resource` (create and update).
void DefaultWorkload(const std::string& resource, rapidjson::Document& object);
// The defaults of a PodTemplateSpec's pod spec (SetDefaults_PodSpec, _Container).
void DefaultPodTemplate(rapidjson::Value& pod_template, rapidjson::Document::AllocatorType& a);

// The strategy validation of the workload kinds (nothing for other resources).
void ValidateWorkloadCreate(const std::string& resource, const rapidjson::Value& object,
                            FieldErrors& errors);
void ValidateWorkloadUpdate(const std::string& resource, const rapidjson::Value& object,
                            const rapidjson::Value& old, FieldErrors& errors);

// Create-time admission and allocation that needs the store: a PVC without
// storageClassName gets the default class, and the pvc-protection finalizer; a PV the
// pv-protection finalizer; a Service its cluster IP (422 when the asked-for one is
// taken or outside kServiceCidr). nullopt: go on.
std::optional<ApiResponse> AdmitWorkloadCreate(Store& store, const std::string& resource,
                                               rapidjson::Document& object);
// An update (PUT) that leaves out what the server allocated keeps it, as the Service
// registry's patchAllocatedValues does: a Service's cluster IPs and IP families, a
// claim's volumeName and storageClassName.
void KeepAllocatedValues(const std::string& resource, rapidjson::Document& next,
                         const rapidjson::Value& stored);
// The same for objects the controllers create (PVCs from volumeClaimTemplates).
void AdmitClaim(Store& store, rapidjson::Document& claim);

// The scale subresource (autoscaling/v1 Scale) of statefulsets, deployments and
// replicasets: GET, PUT and every patch type change only spec.replicas.
ApiResponse HandleScale(Store& store, const ApiRequest& request, const Route& route);

// The StorageClass `standard` (default, hostPath provisioner, Delete, Immediate).
Status CreateDefaultStorageClass(Store& store);

// Pod readiness as the controllers read it: Running, Ready=True, not terminating.
bool IsPodReady(const rapidjson::Value& pod);
bool IsPodTerminating(const rapidjson::Value& pod);
bool IsPodFinished(const rapidjson::Value& pod);
// True when status.conditions has `type` with status True.
bool HasTrueCondition(const rapidjson::Value& object, const char* type);

// The columns kubectl get shows for the workload kinds (pkg/printers/internalversion/
// printers.go), nullptr for other resources; priority 1 columns show with -o wide.
struct TableColumn {
  const char* name;
  int priority;
};
const std::vector<TableColumn>* WorkloadTableColumns(const std::string& resource);
// The cells of one object, in the order of WorkloadTableColumns; `age` is its Age.
std::vector<std::string> WorkloadTableCells(const std::string& resource, const rapidjson::Value& o,
                                            const std::string& age);

}  // namespace kubesim
