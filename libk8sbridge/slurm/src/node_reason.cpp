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

std::string BridgeReason(std::string_view text) {
  std::string out(contract::kBridgeReasonPrefix);
  out += ' ';
  for (char c : text)
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (out.size() <= kMaxBridgeReason)
    return out;
  constexpr std::string_view kCut = "...";
  size_t cut = kMaxBridgeReason - kCut.size();
  // A UTF-8 sequence is at most 4 bytes: back off over at most 3 continuation
  // bytes (10xxxxxx), so that invalid input cannot eat the prefix.
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(out[i]) & 0xC0) == 0x80; };
  for (int i = 0; i < 3 && continuation(cut); ++i)
    --cut;
  out.resize(cut);
  out += kCut;
  return out;
}

}  // namespace k8sbridge
