// The contract: every name k8sbridge reads or writes outside its own process, in
// one place. Kubernetes labels, annotations, taints, conditions and Event reasons;
// the worker pod's environment; the prefixes of the Slurm reasons k8sbridge owns.
// Anything here is a promise to admins, scripts and other controllers, so a
// rename is a breaking change. docs/architecture.md ("The contract") lists the
// same names; scripts/check-layers.py checks that the two agree.
#pragma once

#include <string_view>

namespace k8sbridge::contract {

// ---- Worker pods: ownership. A pod k8sbridge may replace or delete carries all three.
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "k8sbridge";
inline constexpr std::string_view kClusterLabel = "k8sbridge.io/cluster";
inline constexpr std::string_view kNodeLabel = "k8sbridge.io/node";

// ---- Worker pods: informational labels and annotations (k8sbridge-power).
inline constexpr std::string_view kNodeGroupLabel = "k8sbridge.io/node-group";
inline constexpr std::string_view kJobLabel = "k8sbridge.io/job";  // first job; pod affinity
// On a replacement pod (w-3.1, w-3.2 ...: its node's pod was stranded on a lost
// Kubernetes node), its number. A resume finds a node's live replacement by it in one
// small list per call, not by listing every pod (docs/power.md, "A pod on a lost node").
inline constexpr std::string_view kReplacementLabel = "k8sbridge.io/replacement";
inline constexpr std::string_view kJobIdsAnnotation = "k8sbridge.io/job-ids";
inline constexpr std::string_view kFeaturesAnnotation = "k8sbridge.io/features";
// The hash of the node group's pod template the pod was rendered from: a pod whose
// hash is no longer its group's is rolled by k8sbridge-sync (docs/sync.md, "Rollouts").
inline constexpr std::string_view kTemplateHashAnnotation = "k8sbridge.io/template-hash";
// On a pod k8sbridge-sync created for a reboot Slurm issued: that reboot's time (the
// Slurm node's reason_time), so the pod is not replaced a second time.
inline constexpr std::string_view kRebootOfAnnotation = "k8sbridge.io/reboot-of";

// ---- Worker pods: the Slurm node's drain, mirrored by k8sbridge-sync.
inline constexpr std::string_view kDrainReasonAnnotation = "k8sbridge.io/slurm-drain-reason";
inline constexpr std::string_view kDrainUserAnnotation = "k8sbridge.io/slurm-drain-user";
inline constexpr std::string_view kDrainTimeAnnotation = "k8sbridge.io/slurm-drain-time";
// The features its Kubernetes node's labels gave when k8sbridge-sync last looked
// (node_features_k8s), so a relabel knows which features to take away.
inline constexpr std::string_view kLabelFeaturesAnnotation = "k8sbridge.io/label-features";

// ---- Kubernetes nodes: a hardware drain (k8sbridge-sync cordons and taints).
inline constexpr std::string_view kHardwareTaintKey = "k8sbridge.io/hardware";
inline constexpr std::string_view kCordonedByAnnotation = "k8sbridge.io/cordoned-by";
inline constexpr std::string_view kHardwareDrainsAnnotation = "k8sbridge.io/hardware-drains";
inline constexpr std::string_view kHardwareReasonAnnotation = "k8sbridge.io/hardware-reason";
// k8sbridge-health's node condition (the default of its KubeConditionType key).
inline constexpr std::string_view kHealthConditionType = "K8sbridgeHealthProblem";

// ---- Kubernetes nodes: what Kubernetes' node lifecycle says (read, never written).
// The node controller's taint for a node whose kubelet stopped posting (Ready Unknown).
inline constexpr std::string_view kUnreachableTaintKey = "node.kubernetes.io/unreachable";
// An admin's statement that a node is shut down: its pods may be force-deleted.
inline constexpr std::string_view kOutOfServiceTaintKey = "node.kubernetes.io/out-of-service";
// A replacement worker pod for a Slurm node whose old pod is stuck on a lost node is
// named <node><separator><n> (n = 1, 2, ...): never a DNS label, so never another
// Slurm node's pod name.
inline constexpr std::string_view kReplacementPodSeparator = ".";

// ---- Events: reportingController of each program, and the reasons they record.
inline constexpr std::string_view kPowerController = "k8sbridge.io/power";
inline constexpr std::string_view kSyncController = "k8sbridge.io/sync";
inline constexpr std::string_view kHealthController = "k8sbridge.io/health";
inline constexpr std::string_view kResumeFailedEvent = "ResumeFailed";          // power, pod
inline constexpr std::string_view kSlurmNodeDownEvent = "SlurmNodeDown";        // sync, pod
inline constexpr std::string_view kSlurmNodeDrainedEvent = "SlurmNodeDrained";  // sync, pod
inline constexpr std::string_view kSlurmNodeResumedEvent = "SlurmNodeResumed";  // sync, pod
inline constexpr std::string_view kOrphanDeletedEvent = "OrphanDeleted";        // sync, pod
inline constexpr std::string_view kRebootReplacedEvent = "RebootReplaced";      // sync, pod
inline constexpr std::string_view kHardwareDrainEvent = "HardwareDrain";        // sync, node
inline constexpr std::string_view kHardwareDrainClearedEvent = "HardwareDrainCleared";

// ---- Slurm node reasons: the prefix of every reason a k8sbridge component writes.
// Only reasons with one of these are ever replaced or cleared by k8sbridge
// (k8sbridge/slurm/node_reason.h).
inline constexpr std::string_view kBridgeReasonPrefix = "k8sbridge:";         // power, sync
inline constexpr std::string_view kHealthReasonPrefix = "k8sbridge-health:";  // health
inline constexpr std::string_view kJailReasonPrefix = "spank_jail:";          // spank_jail
// k8sbridge-health puts this tag before its prefix for hardware findings; a drain
// reason with it makes k8sbridge-sync cordon the Kubernetes node.
inline constexpr std::string_view kHardwareReasonTag = "[hardware]";

// ---- Environment. Every program and plugin: where k8sbridge.conf is.
inline constexpr std::string_view kEnvConf = "K8SBRIDGE_CONF";
// The worker pod (set by k8sbridge-power, read by k8sbridge-worker and the plugins
// in slurmd).
inline constexpr std::string_view kEnvNodeName = "K8SBRIDGE_NODE_NAME";  // Slurm node: slurmd -N
inline constexpr std::string_view kEnvCluster = "K8SBRIDGE_CLUSTER";
inline constexpr std::string_view kEnvNodeGroup = "K8SBRIDGE_NODE_GROUP";
inline constexpr std::string_view kEnvJobIds = "K8SBRIDGE_JOB_IDS";  // "12,13", may be ""
// ConfServer= (slurmd --conf-server); absent when slurm.conf is in the image.
inline constexpr std::string_view kEnvConfServer = "K8SBRIDGE_CONF_SERVER";
// The munge credential the worker checks before slurmd starts (MungeCheck=yes).
inline constexpr std::string_view kEnvMungeCheck = "K8SBRIDGE_MUNGE_CHECK";
// From the downward API:
inline constexpr std::string_view kEnvPodName = "K8SBRIDGE_POD_NAME";            // metadata.name
inline constexpr std::string_view kEnvPodNamespace = "K8SBRIDGE_POD_NAMESPACE";  // .namespace
inline constexpr std::string_view kEnvPodIp = "K8SBRIDGE_POD_IP";                // status.podIP
inline constexpr std::string_view kEnvHostNode = "K8SBRIDGE_HOST_NODE";          // spec.nodeName
// Set in the pod template, read by k8sbridge-worker.
inline constexpr std::string_view kEnvMungeSocket = "K8SBRIDGE_MUNGE_SOCKET";
inline constexpr std::string_view kEnvMungedKey = "K8SBRIDGE_MUNGED_KEY";
inline constexpr std::string_view kEnvMunged = "K8SBRIDGE_MUNGED";
// munged's private directory: the key's copy, seed, pid and log (root-only, 0700).
// It must not contain, or be inside, the socket's directory, which is bound into
// every job's jail.
inline constexpr std::string_view kEnvMungedDir = "K8SBRIDGE_MUNGED_DIR";
// The user munged runs as (its key copy and directories then that user's); unset:
// root. The login pods set munge: users share that container.
inline constexpr std::string_view kEnvMungedUser = "K8SBRIDGE_MUNGED_USER";
inline constexpr std::string_view kEnvJail = "K8SBRIDGE_JAIL";
inline constexpr std::string_view kEnvJailWait = "K8SBRIDGE_JAIL_WAIT";
inline constexpr std::string_view kEnvJailPrepare = "K8SBRIDGE_JAIL_PREPARE";
inline constexpr std::string_view kEnvSlurmd = "K8SBRIDGE_SLURMD";
// The container entrypoints (k8sbridge-worker, k8sbridge-entrypoint): "1" runs
// the daemon as a supervised child (signals passed on, orphans reaped) even when
// the entrypoint is not PID 1, as tests outside a PID namespace need.
inline constexpr std::string_view kEnvInit = "K8SBRIDGE_INIT";
// k8sbridge-entrypoint (controller and login images): the Slurm programs it runs
// or asks for their version, and the mounted Slurm configuration directory.
inline constexpr std::string_view kEnvSlurmctld = "K8SBRIDGE_SLURMCTLD";
inline constexpr std::string_view kEnvSrun = "K8SBRIDGE_SRUN";
inline constexpr std::string_view kEnvSlurmConfDir = "K8SBRIDGE_SLURM_CONF_DIR";
// k8sbridge-entrypoint controller writes the pod's KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT here (KEY=VALUE lines): slurmctld runs its power programs
// through slurmscriptd with SLURM_CONF alone in their environment
// (src/slurmctld/slurmscriptd.c), so InCluster=yes finds the API server here when
// the variables are unset.
inline constexpr std::string_view kInClusterServiceFile = "/run/k8sbridge/kubernetes-service";
// Where Kubernetes mounts a pod's service account token and CA, and where
// InCluster=yes reads them. A worker pod template may mount there only a
// projected token that only root can read (docs/power.md, "Pod templates").
inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

}  // namespace k8sbridge::contract
