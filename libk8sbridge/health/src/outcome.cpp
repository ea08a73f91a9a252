#include "k8sbridge/health/outcome.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/file.h"

namespace k8sbridge::health {

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kNone:
      return "none";
    case Action::kDrain:
      return "drain";
    case Action::kKeepDrained:
      return "keep drained";
    case Action::kResume:
      return "resume";
    case Action::kLeaveForeignDrain:
      return "leave foreign drain";
  }
  return "?";
}

Decision Decide(const slurm::Node& node, const std::vector<Finding>& findings,
                unsigned clean_runs_before, unsigned resume_after) {
  Decision d;
  // A DOWN node is out of service as much as a drained one: its reason (often
  // Slurm's own, "Not responding") is somebody else's unless it is ours.
  const bool out_of_service = node.OutOfService();
  const bool ours = out_of_service && IsOwnReason(node.reason);
  if (out_of_service && !ours) {
    d.action = Action::kLeaveForeignDrain;
    d.clean_runs = findings.empty() ? clean_runs_before + 1 : 0;
    d.explanation = fmt::format("{} by someone else (\"{}\"): left alone",
                                node.drain ? "drained" : "down", node.reason);
    return d;
  }
  if (!findings.empty()) {
    std::string reason = DrainReason(findings);
    d.clean_runs = 0;
    if (ours && node.reason == reason) {
      d.action = Action::kKeepDrained;
      d.explanation = "still failing; already drained with this reason";
    } else {
      d.action = Action::kDrain;
      d.reason = std::move(reason);
      d.explanation = ours ? "still failing, with a new reason" : "failing: drain";
    }
    return d;
  }
  d.clean_runs = clean_runs_before + 1;
  if (!ours) {
    d.action = Action::kNone;
    d.explanation = "healthy";
    return d;
  }
  if (d.clean_runs >= resume_after) {
    d.action = Action::kResume;
    d.explanation = fmt::format("{} consecutive clean runs: resume our drain", d.clean_runs);
  } else {
    d.action = Action::kKeepDrained;
    d.explanation = fmt::format("clean run {} of {} before resuming", d.clean_runs, resume_after);
  }
  return d;
}

Status Apply(const Decision& d, const std::string& node, slurm::Slurm& slurm) {
  switch (d.action) {
    case Action::kDrain:
      return slurm.Drain(node, d.reason);
    case Action::kResume:
      return slurm.Undrain(node);
    default:
      return Status::Ok();
  }
}

Result<HealthState> LoadState(const std::string& path) {
  HealthState s;
  std::ifstream in(path);
  if (!in)
    return s;
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "clean_runs")
      s.clean_runs = static_cast<unsigned>(value);
    if (key == "kmsg_sequence") {
      s.kmsg_sequence = value;
      s.has_kmsg_sequence = true;
    }
  }
  return s;
}

Status SaveState(const std::string& path, const HealthState& s) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::string text = fmt::format("clean_runs {}\n", s.clean_runs);
  if (s.has_kmsg_sequence)
    text += fmt::format("kmsg_sequence {}\n", s.kmsg_sequence);
  return WriteFileAtomic(path, text, 0644);
}

Outcome DecideAndApply(const std::string& node, const std::vector<Finding>& findings,
                       unsigned clean_runs_before, unsigned resume_after, slurm::Slurm& slurm) {
  Outcome out;
  auto fresh = slurm.LoadNode(node);
  if (!fresh.ok()) {
    out.decision.clean_runs = clean_runs_before;
    out.decision.explanation = "Slurm could not be read: nothing changed";
    out.status = fresh.status();
    return out;
  }
  out.decision = Decide(*fresh, findings, clean_runs_before, resume_after);
  out.status = Apply(out.decision, node, slurm);
  return out;
}

}  // namespace k8sbridge::health
