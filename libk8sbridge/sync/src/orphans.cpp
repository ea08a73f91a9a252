// Orphans (docs/sync.md, "Orphans"): a worker pod that no Slurm node needs is deleted
// after a grace, by uid precondition.
#include <fmt/format.h>

#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/worker_pod.h"
#include "rules.h"

namespace k8sbridge::sync {

// Orphans: a pod whose Slurm node is POWERED_DOWN or unknown to Slurm. A Slurm
// that reports no node at all (a controller started with another slurm.conf, a
// broken answer) says nothing about any pod: every pod would look orphaned, and
// a small cluster stays under the mass-action cap, so none is deleted then.
void Reconciler::PlanOrphans(const World& world,
                             const std::map<std::string, const SlurmNode*>& slurm,
                             std::vector<Action>& out) {
  const auto& current = by_name_.pods;
  for (const kube::Object& p : world.pods) {
    const kube::Object* pod = &p;
    const std::string name = power::SlurmNodeOf(p);
    if (name.empty() || !power::IsOwnedWorkerPod(p, options_.cluster, name))
      continue;
    if (pod->IsBeingDeleted() || world.slurm.empty())
      continue;
    auto it = slurm.find(name);
    std::string why;
    if (it == slurm.end())
      why = fmt::format("Slurm has no node {}", name);
    else if (it->second->powered_down && !it->second->powering_up)
      why = fmt::format("Slurm node {} is POWERED_DOWN", name);
    else if (auto c = current.find(name); c != current.end() && c->second != pod)
      why =
          fmt::format("a second pod of Slurm node {} (pod {} serves it)", name, c->second->Name());
    if (why.empty())
      continue;
    if (Held("orphan:" + pod->Name(), options_.orphan_grace)) {
      Action a{ActionKind::kDeletePod, name, why};
      a.uid = pod->Uid();
      a.pod_name = pod->Name();
      out.push_back(std::move(a));
    }
  }
}

}  // namespace k8sbridge::sync
