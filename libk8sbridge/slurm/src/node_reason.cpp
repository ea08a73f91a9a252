#include "k8sbridge/slurm/node_reason.h"

#include "k8sbridge/contract.h"

namespace k8sbridge {

bool IsK8sbridgeReason(std::string_view reason) {
  while (!reason.empty() && reason.front() == ' ')
    reason.remove_prefix(1);
  if (reason.starts_with(contract::kHardwareReasonTag)) {
    reason.remove_prefix(contract::kHardwareReasonTag.size());
    while (!reason.empty() && reason.front() == ' ')
      reason.remove_prefix(1);
  }
  return reason.starts_with(contract::kBridgeReasonPrefix) ||
         reason.starts_with(contract::kHealthReasonPrefix) ||
         reason.starts_with(contract::kJailReasonPrefix);
}

ReasonWrite ReasonPolicy(bool out_of_service, std::string_view current_reason) {
  if (out_of_service && !current_reason.empty() && !IsK8sbridgeReason(current_reason))
    return ReasonWrite::kKeep;
  return ReasonWrite::kWrite;
}

}  // namespace k8sbridge
