#include "k8sbridge/health/findings.h"

#include <algorithm>

#include <fmt/format.h>

#include "k8sbridge/contract.h"

namespace k8sbridge::health {

void Report::Pass(std::string check, std::string subject, std::string value) {
  observations.push_back({std::move(check), std::move(subject), std::move(value), true});
}

void Report::Fail(std::string check, std::string subject, std::string value, std::string message,
                  Severity severity) {
  observations.push_back({check, subject, std::move(value), false});
  findings.push_back({std::move(check), std::move(subject), std::move(message), severity});
}

void Report::Merge(Report other) {
  for (auto& o : other.observations)
    observations.push_back(std::move(o));
  for (auto& f : other.findings)
    findings.push_back(std::move(f));
}

std::string DrainReason(const std::vector<Finding>& findings) {
  if (findings.empty())
    return "";
  auto lead = std::find_if(findings.begin(), findings.end(),
                           [](const Finding& f) { return f.severity == Severity::kHardware; });
  if (lead == findings.end())
    lead = findings.begin();
  std::string reason;
  if (lead->severity == Severity::kHardware)
    reason = fmt::format("{} ", contract::kHardwareReasonTag);
  reason +=
      lead->subject.empty()
          ? fmt::format("{} {}", contract::kHealthReasonPrefix, lead->message)
          : fmt::format("{} {} {}", contract::kHealthReasonPrefix, lead->subject, lead->message);
  if (findings.size() > 1)
    reason += fmt::format(" (+{} more)", findings.size() - 1);
  return reason;
}

bool IsOwnReason(std::string_view reason) {
  if (reason.starts_with(contract::kHardwareReasonTag)) {
    reason.remove_prefix(contract::kHardwareReasonTag.size());
    while (!reason.empty() && reason.front() == ' ')
      reason.remove_prefix(1);
  }
  return reason.starts_with(contract::kHealthReasonPrefix);
}

}  // namespace k8sbridge::health
