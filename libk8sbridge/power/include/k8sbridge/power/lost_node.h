// Worker pods on Kubernetes nodes that are lost: what Kubernetes says about the node
// of a pod, and the names a Slurm node's pods may have. docs/power.md ("A pod on a
// lost node") and docs/sync.md ("Lost Kubernetes nodes") give the rules.
//
// A node whose kubelet stopped posting (Ready Unknown, the unreachable taint) may
// still run its pods: the API server keeps a deleted pod there Terminating until the
// kubelet confirms, the Node object is deleted, or the node is out of service. Such
// a pod is never force-deleted on a guess; its Slurm node gets a replacement pod
// under a fresh name instead.
#pragma once

#include <string>
#include <string_view>

#include "k8sbridge/kube/object.h"

namespace k8sbridge::power {

// Why the Kubernetes node counts as lost ("Ready Unknown: NodeStatusUnknown: Kubelet
// stopped posting node status.", or "taint node.kubernetes.io/unreachable"), or "" when
// it does not. Ready False (the kubelet posts, and says NotReady) is not lost.
std::string NodeLostWhy(const kube::Object& node);

// True when the pods bound to `node` certainly run no more, so that a force delete
// is safe: the Node object is gone (nullptr), or it is not Ready and carries
// node.kubernetes.io/out-of-service (the rule of Kubernetes' pod GC).
bool NodeShutDown(const kube::Object* node);

// The name of a Slurm node's pod: `node` itself for n = 0, "<node>.<n>" after.
std::string WorkerPodName(std::string_view node, int n);

// The Slurm node a worker pod serves: its k8sbridge.io/node label ("" if none).
std::string SlurmNodeOf(const kube::Object& pod);

// A bound pod that is being deleted on a lost or deleted Kubernetes node (`host`: nullptr
// when the Node object is gone): Kubernetes may keep it for ever, and the Slurm node
// it served is treated as having no pod.
bool Stranded(const kube::Object& pod, const kube::Object* host);

}  // namespace k8sbridge::power
