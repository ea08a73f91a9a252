#include "k8sbridge/power/await_nodes.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace k8sbridge::power {
namespace {

// Slurm's test of a node a job may start on (select_p_job_ready, cons_tres).
bool Up(const slurm::Node& node) {
  return !node.powered_down && !node.powering_up;
}

// Past ResumeTimeout, Slurm has set a node that did not register DOWN: the margin
// lets the wait see that and end as kNodeDown rather than kTimedOut.
constexpr auto kResumeTimeoutMargin = std::chrono::seconds(15);
// Below PrologEpilogTimeout, so the prolog ends before slurmctld would kill it.
constexpr auto kPrologTimeoutMargin = std::chrono::seconds(5);
constexpr auto kSlurmDefaultResumeTimeout = std::chrono::seconds(60);

// The nodes of `nodes` a read of all of them does not show up, in their order;
// `down` is set to the first that is DOWN.
std::vector<std::string> NotUpIn(const std::vector<slurm::Node>& all,
                                 const std::vector<std::string>& nodes, std::string& down) {
  std::unordered_map<std::string_view, const slurm::Node*> by_name;
  by_name.reserve(all.size());
  for (const slurm::Node& n : all)
    by_name.emplace(n.name, &n);
  std::vector<std::string> pending;
  for (const std::string& name : nodes) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      continue;  // not in Slurm (any more): nothing to wait for
    if (it->second->Down() && down.empty())
      down = name;
    if (!Up(*it->second))
      pending.push_back(name);
  }
  return pending;
}

}  // namespace

std::string_view AwaitOutcomeName(AwaitOutcome outcome) {
  switch (outcome) {
    case AwaitOutcome::kUp:
      return "up";
    case AwaitOutcome::kNodeDown:
      return "node down";
    case AwaitOutcome::kTimedOut:
      return "timed out";
    case AwaitOutcome::kUnreadable:
      return "Slurm unreadable";
  }
  return "?";
}

Clock::Steady::duration AwaitLimit(const Result<slurm::Timeouts>& timeouts) {
  const slurm::Timeouts t = timeouts.ok() ? *timeouts : slurm::Timeouts{};
  Clock::Steady::duration limit =
      (t.resume.count() > 0 ? t.resume : kSlurmDefaultResumeTimeout) + kResumeTimeoutMargin;
  if (t.prolog_epilog.count() > 0) {
    const auto below = t.prolog_epilog > kPrologTimeoutMargin
                           ? t.prolog_epilog - kPrologTimeoutMargin
                           : std::chrono::seconds(0);
    limit = std::min<Clock::Steady::duration>(limit, below);
  }
  return limit;
}

AwaitReport AwaitNodesUp(slurm::Slurm& slurm, Clock& clock, const std::vector<std::string>& nodes,
                         const AwaitOptions& options) {
  AwaitReport report;
  const auto start = clock.Now();
  const auto deadline = start + options.limit;
  auto finish = [&](AwaitOutcome outcome, std::string node) {
    report.outcome = outcome;
    report.node = std::move(node);
    report.waited = clock.Now() - start;
    return report;
  };
  std::vector<std::string> pending = nodes;
  auto all = slurm.LoadNodes();
  ++report.reads;
  if (all.ok()) {
    std::string down;
    pending = NotUpIn(*all, nodes, down);
    if (!down.empty())
      return finish(AwaitOutcome::kNodeDown, down);
  } else {
    report.last_error = all.status();
  }
  for (const std::string& name : pending) {
    for (;;) {
      auto node = slurm.LoadNode(name);
      ++report.reads;
      if (node.ok()) {
        report.last_error = Status::Ok();
        if (node->Down())
          return finish(AwaitOutcome::kNodeDown, name);
        if (Up(*node))
          break;
      } else if (node.status().code() == Status::Code::kNotFound) {
        break;  // removed from Slurm: nothing to wait for
      } else {
        report.last_error = node.status();
      }
      const auto now = clock.Now();
      if (now >= deadline) {
        return finish(report.last_error.ok() ? AwaitOutcome::kTimedOut : AwaitOutcome::kUnreadable,
                      name);
      }
      clock.SleepFor(std::min<Clock::Steady::duration>(options.poll_interval, deadline - now));
    }
  }
  return finish(AwaitOutcome::kUp, "");
}

}  // namespace k8sbridge::power
