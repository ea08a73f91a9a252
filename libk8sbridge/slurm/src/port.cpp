#include "k8sbridge/slurm/port.h"

#include <fmt/format.h>

namespace k8sbridge::slurm {

std::string_view Node::BaseName() const {
  switch (base) {
    case Base::kDown:
      return "DOWN";
    case Base::kIdle:
      return "IDLE";
    case Base::kAllocated:
      return "ALLOCATED";
    case Base::kError:
      return "ERROR";
    case Base::kMixed:
      return "MIXED";
    case Base::kFuture:
      return "FUTURE";
    case Base::kUnknown:
      break;
  }
  return "UNKNOWN";
}

ReasonWrite ReasonPolicyFor(const Result<Node>& live) {
  if (!live.ok())
    return ReasonWrite::kWrite;
  return ReasonPolicy(live->OutOfService(), live->reason);
}

FailPlan FailPlanFor(const Result<Node>& live) {
  FailPlan plan;
  plan.reason = ReasonPolicyFor(live);
  if (live.ok() && live->cloud && live->powering_up)
    plan.node_addr = kUnreachableNodeAddr;
  return plan;
}

std::string ForeignReasonKept(std::string_view node, std::string_view reason) {
  return fmt::format(
      "node {} is already out of service with reason \"{}\", which is not k8sbridge's: "
      "left as it is",
      node, reason);
}

}  // namespace k8sbridge::slurm
