#include "schema.h"

#include <map>
#include <set>

#include <fmt/format.h>

namespace kubesim {

namespace {

// One row per Go struct of k8s.io/api (core/v1, coordination/v1, events/v1) and
// k8s.io/apimachinery (meta/v1) that these kinds reach, written from the upstream
// types.go files: the JSON names of its fields, separated by spaces. A plain name is a
// scalar, a list of scalars or a free-form map (labels, resources.limits, data); its
// content is not checked. "name:Type" is an object of Type, "name:[]Type" a list of
// them, ":Type" an inlined struct (embedded TypeMeta, VolumeSource ...).
struct TypeRow {
  const char* type;
  const char* fields;
};

const TypeRow kTypes[] = {
    {"Pod", ":TypeMeta metadata:ObjectMeta spec:PodSpec status:PodStatus"},
    {"Node", ":TypeMeta metadata:ObjectMeta spec:NodeSpec status:NodeStatus"},
    {"Namespace", ":TypeMeta metadata:ObjectMeta spec:NamespaceSpec status:NamespaceStatus"},
    {"ConfigMap", ":TypeMeta metadata:ObjectMeta immutable data binaryData"},
    {"Secret", ":TypeMeta metadata:ObjectMeta immutable data stringData type"},
    {"Event",
     ":TypeMeta metadata:ObjectMeta involvedObject:ObjectReference reason message "
     "source:EventSource firstTimestamp lastTimestamp count type eventTime series:EventSeries "
     "action related:ObjectReference reportingComponent reportingInstance"},
    {"events.k8s.io/v1.Event",
     ":TypeMeta metadata:ObjectMeta eventTime series:EventSeries reportingController "
     "reportingInstance action reason regarding:ObjectReference related:ObjectReference note type "
     "deprecatedSource:EventSource deprecatedFirstTimestamp deprecatedLastTimestamp "
     "deprecatedCount"},
    {"Lease", ":TypeMeta metadata:ObjectMeta spec:LeaseSpec"},
    {"Binding", ":TypeMeta metadata:ObjectMeta target:ObjectReference"},
    {"TypeMeta", "kind apiVersion"},
    {"ObjectMeta",
     "name generateName namespace selfLink uid resourceVersion generation creationTimestamp "
     "deletionTimestamp deletionGracePeriodSeconds labels annotations "
     "ownerReferences:[]OwnerReference finalizers managedFields:[]ManagedFieldsEntry"},
    {"PodSpec",
     "volumes:[]Volume initContainers:[]Container containers:[]Container "
     "ephemeralContainers:[]EphemeralContainer restartPolicy terminationGracePeriodSeconds "
     "activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount "
     "automountServiceAccountToken nodeName hostNetwork hostPID hostIPC shareProcessNamespace "
     "securityContext:PodSecurityContext imagePullSecrets:[]LocalObjectReference hostname "
     "subdomain affinity:Affinity schedulerName tolerations:[]Toleration hostAliases:[]HostAlias "
     "priorityClassName priority dnsConfig:PodDNSConfig readinessGates:[]PodReadinessGate "
     "runtimeClassName enableServiceLinks preemptionPolicy overhead "
     "topologySpreadConstraints:[]TopologySpreadConstraint setHostnameAsFQDN os:PodOS hostUsers "
     "schedulingGates:[]PodSchedulingGate resourceClaims:[]PodResourceClaim "
     "resources:ResourceRequirements hostnameOverride schedulingGroup:PodSchedulingGroup "
     "evictionResponders:[]EvictionResponder"},
    {"PodStatus",
     "observedGeneration phase conditions:[]PodCondition message reason nominatedNodeName hostIP "
     "hostIPs:[]HostIP podIP podIPs:[]PodIP startTime initContainerStatuses:[]ContainerStatus "
     "containerStatuses:[]ContainerStatus qosClass ephemeralContainerStatuses:[]ContainerStatus "
     "resize resourceClaimStatuses:[]PodResourceClaimStatus "
     "extendedResourceClaimStatus:PodExtendedResourceClaimStatus allocatedResources "
     "resources:ResourceRequirements "
     "nodeAllocatableResourceClaimStatuses:[]NodeAllocatableResourceClaimStatus "
     "volumeHealth:[]PodVolumeHealth"},
    {"NodeSpec",
     "podCIDR podCIDRs providerID unschedulable taints:[]Taint configSource:NodeConfigSource "
     "externalID podPreemptionPolicy:NodePodPreemptionPolicy"},
    {"NodeStatus",
     "capacity allocatable phase conditions:[]NodeCondition addresses:[]NodeAddress "
     "daemonEndpoints:NodeDaemonEndpoints nodeInfo:NodeSystemInfo images:[]ContainerImage "
     "volumesInUse volumesAttached:[]AttachedVolume config:NodeConfigStatus "
     "runtimeHandlers:[]NodeRuntimeHandler features:NodeFeatures declaredFeatures"},
    {"NamespaceSpec", "finalizers"},
    {"NamespaceStatus", "phase conditions:[]NamespaceCondition"},
    {"ObjectReference", "kind namespace name uid apiVersion resourceVersion fieldPath"},
    {"EventSource", "component host"},
    {"EventSeries", "count lastObservedTime"},
    {"OwnerReference", "apiVersion kind name uid controller blockOwnerDeletion"},
    {"ManagedFieldsEntry", "manager operation apiVersion time fieldsType fieldsV1 subresource"},
    {"Volume", "name :VolumeSource"},
    {"Container",
     "name image command args workingDir ports:[]ContainerPort envFrom:[]EnvFromSource "
     "env:[]EnvVar resources:ResourceRequirements resizePolicy:[]ContainerResizePolicy "
     "restartPolicy restartPolicyRules:[]ContainerRestartRule volumeMounts:[]VolumeMount "
     "volumeDevices:[]VolumeDevice livenessProbe:Probe readinessProbe:Probe startupProbe:Probe "
     "lifecycle:Lifecycle terminationMessagePath terminationMessagePolicy imagePullPolicy "
     "securityContext:SecurityContext stdin stdinOnce tty"},
    {"EphemeralContainer",
     ":Container targetContainerName"},  // EphemeralContainerCommon = Container
    {"PodSecurityContext",
     "seLinuxOptions:SELinuxOptions windowsOptions:WindowsSecurityContextOptions runAsUser "
     "runAsGroup runAsNonRoot supplementalGroups supplementalGroupsPolicy fsGroup sysctls:[]Sysctl "
     "fsGroupChangePolicy seccompProfile:SeccompProfile appArmorProfile:AppArmorProfile "
     "seLinuxChangePolicy"},
    {"LocalObjectReference", "name"},
    {"Affinity",
     "nodeAffinity:NodeAffinity podAffinity:PodAffinity podAntiAffinity:PodAntiAffinity"},
    {"Toleration", "key operator value effect tolerationSeconds"},
    {"HostAlias", "ip hostnames"},
    {"PodDNSConfig", "nameservers searches options:[]PodDNSConfigOption"},
    {"PodReadinessGate", "conditionType"},
    {"TopologySpreadConstraint",
     "maxSkew topologyKey whenUnsatisfiable labelSelector:LabelSelector minDomains "
     "nodeAffinityPolicy nodeTaintsPolicy matchLabelKeys"},
    {"PodOS", "name"},
    {"PodSchedulingGate", "name"},
    {"PodResourceClaim", "name resourceClaimName resourceClaimTemplateName"},
    {"ResourceRequirements", "limits requests claims:[]ResourceClaim"},
    {"PodSchedulingGroup", "podGroupName"},
    {"EvictionResponder", "name priority"},
    {"PodCondition",
     "type observedGeneration status lastProbeTime lastTransitionTime reason message"},
    {"HostIP", "ip"},
    {"PodIP", "ip"},
    {"ContainerStatus",
     "name state:ContainerState lastState:ContainerState ready restartCount image imageID "
     "containerID started allocatedResources resources:ResourceRequirements "
     "volumeMounts:[]VolumeMountStatus user:ContainerUser "
     "allocatedResourcesStatus:[]ResourceStatus stopSignal"},
    {"PodResourceClaimStatus", "name resourceClaimName"},
    {"PodExtendedResourceClaimStatus",
     "requestMappings:[]ContainerExtendedResourceRequest resourceClaimName"},
    {"NodeAllocatableResourceClaimStatus",
     "resourceClaimName containers mapping:[]NodeAllocatableMappedResources "
     "overhead:[]NodeAllocatableOverheadResources"},
    {"PodVolumeHealth", "name healthConditions:[]VolumeHealthCondition lastTransitionTime"},
    {"Taint", "key value effect timeAdded"},
    {"NodeConfigSource", "configMap:ConfigMapNodeConfigSource"},
    {"NodePodPreemptionPolicy", "disableResizePreemption"},
    {"NodeCondition", "type status lastHeartbeatTime lastTransitionTime reason message"},
    {"NodeAddress", "type address"},
    {"NodeDaemonEndpoints", "kubeletEndpoint:DaemonEndpoint"},
    {"NodeSystemInfo",
     "machineID systemUUID bootID kernelVersion osImage containerRuntimeVersion kubeletVersion "
     "kubeProxyVersion operatingSystem architecture swap:NodeSwapStatus"},
    {"ContainerImage", "names sizeBytes"},
    {"AttachedVolume", "name devicePath"},
    {"NodeConfigStatus",
     "assigned:NodeConfigSource active:NodeConfigSource lastKnownGood:NodeConfigSource error"},
    {"NodeRuntimeHandler", "name features:NodeRuntimeHandlerFeatures"},
    {"NodeFeatures", "supplementalGroupsPolicy"},
    {"NamespaceCondition", "type status lastTransitionTime reason message"},
    {"VolumeSource",
     "hostPath:HostPathVolumeSource emptyDir:EmptyDirVolumeSource "
     "gcePersistentDisk:GCEPersistentDiskVolumeSource "
     "awsElasticBlockStore:AWSElasticBlockStoreVolumeSource gitRepo:GitRepoVolumeSource "
     "secret:SecretVolumeSource nfs:NFSVolumeSource iscsi:ISCSIVolumeSource "
     "glusterfs:GlusterfsVolumeSource persistentVolumeClaim:PersistentVolumeClaimVolumeSource "
     "rbd:RBDVolumeSource flexVolume:FlexVolumeSource cinder:CinderVolumeSource "
     "cephfs:CephFSVolumeSource flocker:FlockerVolumeSource downwardAPI:DownwardAPIVolumeSource "
     "fc:FCVolumeSource azureFile:AzureFileVolumeSource configMap:ConfigMapVolumeSource "
     "vsphereVolume:VsphereVirtualDiskVolumeSource quobyte:QuobyteVolumeSource "
     "azureDisk:AzureDiskVolumeSource photonPersistentDisk:PhotonPersistentDiskVolumeSource "
     "projected:ProjectedVolumeSource portworxVolume:PortworxVolumeSource "
     "scaleIO:ScaleIOVolumeSource storageos:StorageOSVolumeSource csi:CSIVolumeSource "
     "ephemeral:EphemeralVolumeSource image:ImageVolumeSource"},
    {"ContainerPort", "name hostPort containerPort protocol hostIP"},
    {"EnvFromSource", "prefix configMapRef:ConfigMapEnvSource secretRef:SecretEnvSource"},
    {"EnvVar", "name value valueFrom:EnvVarSource"},
    {"ContainerResizePolicy", "resourceName restartPolicy"},
    {"ContainerRestartRule", "action exitCodes:ContainerRestartRuleOnExitCodes"},
    {"VolumeMount",
     "name readOnly recursiveReadOnly mountPath subPath mountPropagation subPathExpr "
     "bindMountOptions"},
    {"VolumeDevice", "name devicePath"},
    {"Probe",
     ":ProbeHandler initialDelaySeconds timeoutSeconds periodSeconds successThreshold "
     "failureThreshold terminationGracePeriodSeconds"},
    {"Lifecycle", "postStart:LifecycleHandler preStop:LifecycleHandler stopSignal"},
    {"SecurityContext",
     "capabilities:Capabilities privileged seLinuxOptions:SELinuxOptions "
     "windowsOptions:WindowsSecurityContextOptions runAsUser runAsGroup runAsNonRoot "
     "readOnlyRootFilesystem allowPrivilegeEscalation procMount seccompProfile:SeccompProfile "
     "appArmorProfile:AppArmorProfile"},
    {"SELinuxOptions", "user role type level"},
    {"WindowsSecurityContextOptions",
     "gmsaCredentialSpecName gmsaCredentialSpec runAsUserName hostProcess"},
    {"Sysctl", "name value"},
    {"SeccompProfile", "type localhostProfile"},
    {"AppArmorProfile", "type localhostProfile"},
    {"NodeAffinity",
     "requiredDuringSchedulingIgnoredDuringExecution:NodeSelector "
     "preferredDuringSchedulingIgnoredDuringExecution:[]PreferredSchedulingTerm"},
    {"PodAffinity",
     "requiredDuringSchedulingIgnoredDuringExecution:[]PodAffinityTerm "
     "preferredDuringSchedulingIgnoredDuringExecution:[]WeightedPodAffinityTerm"},
    {"PodAntiAffinity",
     "requiredDuringSchedulingIgnoredDuringExecution:[]PodAffinityTerm "
     "preferredDuringSchedulingIgnoredDuringExecution:[]WeightedPodAffinityTerm"},
    {"PodDNSConfigOption", "name value"},
    {"LabelSelector", "matchLabels matchExpressions:[]LabelSelectorRequirement"},
    {"ResourceClaim", "name request"},
    {"ContainerState",
     "waiting:ContainerStateWaiting running:ContainerStateRunning "
     "terminated:ContainerStateTerminated"},
    {"VolumeMountStatus", "name mountPath readOnly recursiveReadOnly volumeStatus:VolumeStatus"},
    {"ContainerUser", "linux:LinuxContainerUser"},
    {"ResourceStatus", "name resources:[]ResourceHealth"},
    {"ContainerExtendedResourceRequest", "containerName resourceName requestName"},
    {"NodeAllocatableMappedResources", "name quantity"},
    {"NodeAllocatableOverheadResources", "name perPod perContainer"},
    {"VolumeHealthCondition", "status reason message"},
    {"ConfigMapNodeConfigSource", "namespace name uid resourceVersion kubeletConfigKey"},
    {"DaemonEndpoint", "Port"},
    {"NodeSwapStatus", "capacity"},
    {"NodeRuntimeHandlerFeatures", "recursiveReadOnlyMounts userNamespaces"},
    {"HostPathVolumeSource", "path type"},
    {"EmptyDirVolumeSource", "medium sizeLimit mode"},
    {"GCEPersistentDiskVolumeSource", "pdName fsType partition readOnly"},
    {"AWSElasticBlockStoreVolumeSource", "volumeID fsType partition readOnly"},
    {"GitRepoVolumeSource", "repository revision directory"},
    {"SecretVolumeSource", "secretName items:[]KeyToPath defaultMode optional defaultUser"},
    {"NFSVolumeSource", "server path readOnly"},
    {"ISCSIVolumeSource",
     "targetPortal iqn lun iscsiInterface fsType readOnly portals chapAuthDiscovery "
     "chapAuthSession secretRef:LocalObjectReference initiatorName"},
    {"GlusterfsVolumeSource", "endpoints path readOnly"},
    {"PersistentVolumeClaimVolumeSource", "claimName readOnly"},
    {"RBDVolumeSource",
     "monitors image fsType pool user keyring secretRef:LocalObjectReference readOnly"},
    {"FlexVolumeSource", "driver fsType secretRef:LocalObjectReference readOnly options"},
    {"CinderVolumeSource", "volumeID fsType readOnly secretRef:LocalObjectReference"},
    {"CephFSVolumeSource", "monitors path user secretFile secretRef:LocalObjectReference readOnly"},
    {"FlockerVolumeSource", "datasetName datasetUUID"},
    {"DownwardAPIVolumeSource", "items:[]DownwardAPIVolumeFile defaultMode defaultUser"},
    {"FCVolumeSource", "targetWWNs lun fsType readOnly wwids"},
    {"AzureFileVolumeSource", "secretName shareName readOnly"},
    {"ConfigMapVolumeSource",
     ":LocalObjectReference items:[]KeyToPath defaultMode optional defaultUser"},
    {"VsphereVirtualDiskVolumeSource", "volumePath fsType storagePolicyName storagePolicyID"},
    {"QuobyteVolumeSource", "registry volume readOnly user group tenant"},
    {"AzureDiskVolumeSource", "diskName diskURI cachingMode fsType readOnly kind"},
    {"PhotonPersistentDiskVolumeSource", "pdID fsType"},
    {"ProjectedVolumeSource", "sources:[]VolumeProjection defaultMode defaultUser"},
    {"PortworxVolumeSource", "volumeID fsType readOnly"},
    {"ScaleIOVolumeSource",
     "gateway system secretRef:LocalObjectReference sslEnabled protectionDomain storagePool "
     "storageMode volumeName fsType readOnly"},
    {"StorageOSVolumeSource",
     "volumeName volumeNamespace fsType readOnly secretRef:LocalObjectReference"},
    {"CSIVolumeSource",
     "driver readOnly fsType volumeAttributes nodePublishSecretRef:LocalObjectReference"},
    {"EphemeralVolumeSource", "volumeClaimTemplate:PersistentVolumeClaimTemplate"},
    {"ImageVolumeSource", "reference pullPolicy"},
    {"ConfigMapEnvSource", ":LocalObjectReference optional"},
    {"SecretEnvSource", ":LocalObjectReference optional"},
    {"EnvVarSource",
     "fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector "
     "configMapKeyRef:ConfigMapKeySelector secretKeyRef:SecretKeySelector "
     "fileKeyRef:FileKeySelector"},
    {"ContainerRestartRuleOnExitCodes", "operator values"},
    {"ProbeHandler",
     "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction grpc:GRPCAction"},
    {"LifecycleHandler",
     "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction sleep:SleepAction"},
    {"Capabilities", "add drop"},
    {"NodeSelector", "nodeSelectorTerms:[]NodeSelectorTerm"},
    {"PreferredSchedulingTerm", "weight preference:NodeSelectorTerm"},
    {"PodAffinityTerm",
     "labelSelector:LabelSelector namespaces topologyKey namespaceSelector:LabelSelector "
     "matchLabelKeys mismatchLabelKeys"},
    {"WeightedPodAffinityTerm", "weight podAffinityTerm:PodAffinityTerm"},
    {"LabelSelectorRequirement", "key operator values"},
    {"ContainerStateWaiting", "reason message"},
    {"ContainerStateRunning", "startedAt"},
    {"ContainerStateTerminated", "exitCode signal reason message startedAt finishedAt containerID"},
    {"VolumeStatus", "image:ImageVolumeStatus"},
    {"LinuxContainerUser", "uid gid supplementalGroups"},
    {"ResourceHealth", "resourceID health message"},
    {"KeyToPath", "key path mode user"},
    {"DownwardAPIVolumeFile",
     "path fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector mode user"},
    {"VolumeProjection",
     "secret:SecretProjection downwardAPI:DownwardAPIProjection configMap:ConfigMapProjection "
     "serviceAccountToken:ServiceAccountTokenProjection "
     "clusterTrustBundle:ClusterTrustBundleProjection podCertificate:PodCertificateProjection"},
    {"PersistentVolumeClaimTemplate", "metadata:ObjectMeta spec:PersistentVolumeClaimSpec"},
    {"ObjectFieldSelector", "apiVersion fieldPath"},
    {"ResourceFieldSelector", "containerName resource divisor"},
    {"ConfigMapKeySelector", ":LocalObjectReference key optional"},
    {"SecretKeySelector", ":LocalObjectReference key optional"},
    {"FileKeySelector", "volumeName path key optional"},
    {"ExecAction", "command"},
    {"HTTPGetAction", "path port host scheme httpHeaders:[]HTTPHeader protocol"},
    {"TCPSocketAction", "port host"},
    {"GRPCAction", "port service mode"},
    {"SleepAction", "seconds"},
    {"NodeSelectorTerm",
     "matchExpressions:[]NodeSelectorRequirement matchFields:[]NodeSelectorRequirement"},
    {"ImageVolumeStatus", "imageRef"},
    {"SecretProjection", ":LocalObjectReference items:[]KeyToPath optional"},
    {"DownwardAPIProjection", "items:[]DownwardAPIVolumeFile"},
    {"ConfigMapProjection", ":LocalObjectReference items:[]KeyToPath optional"},
    {"ServiceAccountTokenProjection", "audience expirationSeconds path user"},
    {"ClusterTrustBundleProjection",
     "name signerName labelSelector:LabelSelector optional path user"},
    {"PodCertificateProjection",
     "signerName keyType maxExpirationSeconds credentialBundlePath keyPath certificateChainPath "
     "userAnnotations user"},
    {"PersistentVolumeClaimSpec",
     "accessModes selector:LabelSelector resources:VolumeResourceRequirements volumeName "
     "storageClassName volumeMode dataSource:TypedLocalObjectReference "
     "dataSourceRef:TypedObjectReference volumeAttributesClassName"},
    {"HTTPHeader", "name value"},
    {"NodeSelectorRequirement", "key operator values"},
    {"VolumeResourceRequirements", "limits requests"},
    {"TypedLocalObjectReference", "apiGroup kind name"},
    {"TypedObjectReference", "apiGroup kind name namespace"},
    {"LeaseSpec",
     "holderIdentity leaseDurationSeconds acquireTime renewTime leaseTransitions strategy "
     "preferredHolder"},
    // The workload kinds (k8s.io/api apps/v1, batch/v1, core/v1, storage/v1 types.go);
    // their status types, the PersistentVolume spec, Job policies and Endpoints subsets
    // are left unchecked (no rows).
    {"PodTemplateSpec", "metadata:ObjectMeta spec:PodSpec"},
    {"StatefulSet", ":TypeMeta metadata:ObjectMeta spec:StatefulSetSpec status:StatefulSetStatus"},
    {"StatefulSetSpec",
     "replicas selector:LabelSelector template:PodTemplateSpec "
     "volumeClaimTemplates:[]PersistentVolumeClaim serviceName podManagementPolicy "
     "updateStrategy:StatefulSetUpdateStrategy revisionHistoryLimit minReadySeconds "
     "persistentVolumeClaimRetentionPolicy:StatefulSetPersistentVolumeClaimRetentionPolicy "
     "ordinals:StatefulSetOrdinals"},
    {"StatefulSetUpdateStrategy", "type rollingUpdate:RollingUpdateStatefulSetStrategy"},
    {"RollingUpdateStatefulSetStrategy", "partition maxUnavailable"},
    {"StatefulSetPersistentVolumeClaimRetentionPolicy", "whenDeleted whenScaled"},
    {"StatefulSetOrdinals", "start"},
    {"Deployment", ":TypeMeta metadata:ObjectMeta spec:DeploymentSpec status:DeploymentStatus"},
    {"DeploymentSpec",
     "replicas selector:LabelSelector template:PodTemplateSpec strategy:DeploymentStrategy "
     "minReadySeconds revisionHistoryLimit paused progressDeadlineSeconds"},
    {"DeploymentStrategy", "type rollingUpdate:RollingUpdateDeployment"},
    {"RollingUpdateDeployment", "maxUnavailable maxSurge"},
    {"ReplicaSet", ":TypeMeta metadata:ObjectMeta spec:ReplicaSetSpec status:ReplicaSetStatus"},
    {"ReplicaSetSpec", "replicas minReadySeconds selector:LabelSelector template:PodTemplateSpec"},
    {"ControllerRevision", ":TypeMeta metadata:ObjectMeta data revision"},
    {"Job", ":TypeMeta metadata:ObjectMeta spec:JobSpec status:JobStatus"},
    {"JobSpec",
     "parallelism completions activeDeadlineSeconds podFailurePolicy:PodFailurePolicy "
     "successPolicy:SuccessPolicy backoffLimit backoffLimitPerIndex maxFailedIndexes "
     "selector:LabelSelector manualSelector template:PodTemplateSpec ttlSecondsAfterFinished "
     "completionMode suspend podReplacementPolicy managedBy"},
    {"PersistentVolumeClaim",
     ":TypeMeta metadata:ObjectMeta spec:PersistentVolumeClaimSpec "
     "status:PersistentVolumeClaimStatus"},
    {"PersistentVolume",
     ":TypeMeta metadata:ObjectMeta spec:PersistentVolumeSpec status:PersistentVolumeStatus"},
    {"Service", ":TypeMeta metadata:ObjectMeta spec:ServiceSpec status:ServiceStatus"},
    {"ServiceSpec",
     "ports:[]ServicePort selector clusterIP clusterIPs type externalIPs sessionAffinity "
     "loadBalancerIP loadBalancerSourceRanges externalName externalTrafficPolicy "
     "healthCheckNodePort publishNotReadyAddresses sessionAffinityConfig:SessionAffinityConfig "
     "ipFamilies ipFamilyPolicy allocateLoadBalancerNodePorts loadBalancerClass "
     "internalTrafficPolicy trafficDistribution"},
    {"ServicePort", "name protocol appProtocol port targetPort nodePort"},
    {"Endpoints", ":TypeMeta metadata:ObjectMeta subsets"},
    {"StorageClass",
     ":TypeMeta metadata:ObjectMeta provisioner parameters reclaimPolicy mountOptions "
     "allowVolumeExpansion volumeBindingMode allowedTopologies"},
};

// A field's declared type: "" plain, else the type and whether it is a list.
struct FieldType {
  std::string type;
  bool list = false;
};
using FieldTable = std::map<std::string, FieldType>;

void AddFields(const std::map<std::string, std::string>& rows, const std::string& type,
               FieldTable& out) {
  auto row = rows.find(type);
  if (row == rows.end())
    return;
  size_t start = 0;
  const std::string& text = row->second;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos)
      end = text.size();
    std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty())
      continue;
    size_t colon = word.find(':');
    if (colon == std::string::npos) {
      out[word] = FieldType{};
      continue;
    }
    std::string name = word.substr(0, colon);
    std::string of = word.substr(colon + 1);
    if (name.empty()) {
      AddFields(rows, of, out);  // inlined struct
      continue;
    }
    bool list = of.rfind("[]", 0) == 0;
    out[name] = FieldType{list ? of.substr(2) : of, list};
  }
}

const std::map<std::string, FieldTable>& Tables() {
  static const std::map<std::string, FieldTable> tables = [] {
    std::map<std::string, std::string> rows;
    for (const TypeRow& row : kTypes)
      rows[row.type] = row.fields;
    std::map<std::string, FieldTable> out;
    for (const auto& [type, fields] : rows)
      AddFields(rows, type, out[type]);
    return out;
  }();
  return tables;
}

std::string Child(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

void Walk(const FieldTable& table, rapidjson::Value& object, const std::string& path,
          std::vector<std::string>& out);

void WalkValue(const FieldType& type, rapidjson::Value& value, const std::string& path,
               std::vector<std::string>& out) {
  if (type.type.empty())
    return;
  auto table = Tables().find(type.type);
  if (table == Tables().end())
    return;
  if (!type.list) {
    if (value.IsObject())
      Walk(table->second, value, path, out);
    return;
  }
  if (!value.IsArray())
    return;
  for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
    if (value[i].IsObject())
      Walk(table->second, value[i], fmt::format("{}[{}]", path, i), out);
  }
}

void Walk(const FieldTable& table, rapidjson::Value& object, const std::string& path,
          std::vector<std::string>& out) {
  std::map<std::string, int> count;
  for (auto m = object.MemberBegin(); m != object.MemberEnd(); ++m)
    ++count[std::string(m->name.GetString(), m->name.GetStringLength())];
  std::set<std::string> reported;
  for (auto m = object.MemberBegin(); m != object.MemberEnd();) {
    std::string name(m->name.GetString(), m->name.GetStringLength());
    std::string child = Child(path, name);
    auto field = table.find(name);
    if (field == table.end()) {
      if (reported.insert(name).second)
        out.push_back(fmt::format("unknown field \"{}\"", child));
      m = object.EraseMember(m);
      continue;
    }
    if (count[name] > 1) {
      --count[name];
      if (reported.insert(name).second)
        out.push_back(fmt::format("duplicate field \"{}\"", child));
      m = object.EraseMember(m);
      continue;
    }
    WalkValue(field->second, m->value, child, out);
    ++m;
  }
}

}  // namespace

std::string SchemaTypeFor(const std::string& group, const std::string& resource) {
  static const std::map<std::pair<std::string, std::string>, std::string> types = {
      {{"", "pods"}, "Pod"},
      {{"", "nodes"}, "Node"},
      {{"", "namespaces"}, "Namespace"},
      {{"", "configmaps"}, "ConfigMap"},
      {{"", "secrets"}, "Secret"},
      {{"", "events"}, "Event"},
      {{"events.k8s.io", "events"}, "events.k8s.io/v1.Event"},
      {{"coordination.k8s.io", "leases"}, "Lease"},
      {{"apps", "statefulsets"}, "StatefulSet"},
      {{"apps", "deployments"}, "Deployment"},
      {{"apps", "replicasets"}, "ReplicaSet"},
      {{"apps", "controllerrevisions"}, "ControllerRevision"},
      {{"batch", "jobs"}, "Job"},
      {{"", "persistentvolumeclaims"}, "PersistentVolumeClaim"},
      {{"", "persistentvolumes"}, "PersistentVolume"},
      {{"", "services"}, "Service"},
      {{"", "endpoints"}, "Endpoints"},
      {{"storage.k8s.io", "storageclasses"}, "StorageClass"},
  };
  auto it = types.find({group, resource});
  return it == types.end() ? "" : it->second;
}

std::vector<std::string> DropUnknownFields(const std::string& type, rapidjson::Value& object) {
  std::vector<std::string> out;
  auto table = Tables().find(type);
  if (table != Tables().end() && object.IsObject())
    Walk(table->second, object, "", out);
  return out;
}

}  // namespace kubesim
