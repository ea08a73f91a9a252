#include "metrics.h"

#include <chrono>

#include "k8sbridge/contract.h"
#include "k8sbridge/health/findings.h"

namespace k8sbridge::sync {
namespace {

// Counts by label value; values seen before and absent now go to 0.
void SetCounts(prometheus::Family<prometheus::Gauge>& family, const std::string& label,
               std::map<std::string, prometheus::Gauge*>& seen,
               const std::map<std::string, int>& counts) {
  for (auto& [k, g] : seen)
    g->Set(0);
  for (const auto& [k, n] : counts) {
    auto it = seen.find(k);
    if (it == seen.end())
      it = seen.emplace(k, &family.Add({{label, k}})).first;
    it->second->Set(n);
  }
}

std::string StateName(const SlurmNode& n) {
  std::string s(n.BaseName());
  if (n.drain)
    s += "+DRAIN";
  if (n.powered_down)
    s += "+POWERED_DOWN";
  if (n.powering_up)
    s += "+POWERING_UP";
  if (n.powering_down)
    s += "+POWERING_DOWN";
  return s;
}

}  // namespace

SyncMetrics::SyncMetrics(prometheus::Registry& r)
    : nodes_(prometheus::BuildGauge()
                 .Name("k8sbridge_sync_slurm_nodes")
                 .Help("Slurm nodes by state (base state and DRAIN/POWER flags)")
                 .Register(r)),
      pods_(prometheus::BuildGauge()
                .Name("k8sbridge_sync_pods")
                .Help("Worker pods of this cluster by phase (Terminating when being deleted)")
                .Register(r)),
      actions_(prometheus::BuildCounter()
                   .Name("k8sbridge_sync_actions_total")
                   .Help("Actions taken, by kind and result")
                   .Register(r)),
      reconcile_(prometheus::BuildHistogram()
                     .Name("k8sbridge_sync_reconcile_seconds")
                     .Help("Time of one reconcile pass (plan and actions)")
                     .Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1,
                                                                      0.25, 0.5, 1, 2.5, 5, 10})),
      api_errors_(prometheus::BuildCounter()
                      .Name("k8sbridge_sync_api_errors_total")
                      .Help("Failed calls to Kubernetes or Slurm")
                      .Register(r)),
      resume_(prometheus::BuildHistogram()
                  .Name("k8sbridge_sync_resume_registration_seconds")
                  .Help("From POWERING_UP seen to the node registered (up)")
                  .Register(r)
                  .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 5, 10, 20, 30, 60, 120,
                                                                   300, 600})),
      leader_(prometheus::BuildGauge()
                  .Name("k8sbridge_sync_leader")
                  .Help("1 while this daemon holds the lease and acts")
                  .Register(r)
                  .Add({})),
      fresh_(prometheus::BuildGauge()
                 .Name("k8sbridge_sync_source_fresh")
                 .Help("1 while the side could be read; nothing is done while either is 0")
                 .Register(r)),
      skipped_(prometheus::BuildCounter()
                   .Name("k8sbridge_sync_reconciles_skipped_total")
                   .Help("Reconcile passes skipped, by reason")
                   .Register(r)),
      breaker_(prometheus::BuildGauge()
                   .Name("k8sbridge_sync_circuit_breaker_open")
                   .Help("1 while the node group's circuit breaker keeps its nodes drained")
                   .Register(r)),
      health_drains_(prometheus::BuildGauge()
                         .Name("k8sbridge_health_drained_nodes")
                         .Help("Slurm nodes drained by k8sbridge-health, by whether the finding "
                               "is tagged [hardware]")
                         .Register(r)) {
  // Both sides start at 0, so that rate() and a dashboard see the family before
  // the first error.
  for (const char* side : {"kubernetes", "slurm"})
    api_errors_.Add({{"side", side}});
}

void SyncMetrics::RequestDone(std::string_view verb, int code, Clock::Steady::duration) {
  if (ApiAnswering::Failed(code))
    ApiError("kubernetes");
  api_.RequestDone(verb, code);
}

void SyncMetrics::WatchRestarted(std::string_view, std::string_view reason) {
  if (reason == "error")
    ApiError("kubernetes");
}

void SyncMetrics::ApiError(const std::string& side) {
  api_errors_.Add({{"side", side}}).Increment();
}

void SyncMetrics::Action(ActionKind kind, std::string_view result) {
  actions_.Add({{"kind", std::string(ActionKindName(kind))}, {"result", std::string(result)}})
      .Increment();
}

void SyncMetrics::Reconciled(Clock::Steady::duration d) {
  reconcile_.Observe(std::chrono::duration<double>(d).count());
}

void SyncMetrics::Resumed(Clock::Steady::duration d) {
  resume_.Observe(std::chrono::duration<double>(d).count());
}

void SyncMetrics::Fresh(std::string_view side, bool on) {
  fresh_.Add({{"side", std::string(side)}}).Set(on ? 1 : 0);
}

void SyncMetrics::Skipped(std::string_view reason) {
  skipped_.Add({{"reason", std::string(reason)}}).Increment();
}

void SyncMetrics::Breaker(const std::string& group, bool open) {
  breaker_.Add({{"group", group}}).Set(open ? 1 : 0);
}

void SyncMetrics::Census(const World& w) {
  std::map<std::string, int> states, phases;
  for (const SlurmNode& n : w.slurm)
    ++states[StateName(n)];
  for (const kube::Object& p : w.pods) {
    std::string phase = p.IsBeingDeleted() ? "Terminating" : kube::pod::Phase(p);
    ++phases[phase.empty() ? "Unknown" : phase];
  }
  SetCounts(nodes_, "state", seen_states_, states);
  SetCounts(pods_, "phase", seen_phases_, phases);
  SetCounts(health_drains_, "hardware", seen_health_, HealthDrains(w));
}

std::map<std::string, int> HealthDrains(const World& world) {
  std::map<std::string, int> drains{{"true", 0}, {"false", 0}};
  for (const SlurmNode& n : world.slurm) {
    if (n.drain && health::IsOwnReason(n.reason))
      ++drains[n.reason.starts_with(contract::kHardwareReasonTag) ? "true" : "false"];
  }
  return drains;
}

namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type) {
  return {std::move(name), std::move(help), type, {}};
}

prometheus::ClientMetric Counted(std::vector<prometheus::ClientMetric::Label> labels,
                                 double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

}  // namespace

std::vector<prometheus::MetricFamily> PowerFamilies(const Result<power::PowerCounters>& counters) {
  auto readable = Family("k8sbridge_power_metrics_file_readable",
                         "1 while PowerMetricsFile can be read", prometheus::MetricType::Gauge);
  readable.metric.emplace_back().gauge.value = counters.ok() ? 1 : 0;
  if (!counters.ok())
    return {readable};
  auto calls = Family("k8sbridge_power_calls_total",
                      "Runs of k8sbridge-power by subcommand and result (ok: every node, failed: "
                      "some node failed, error: gave up before touching a pod)",
                      prometheus::MetricType::Counter);
  auto nodes = Family("k8sbridge_power_nodes_total",
                      "Nodes k8sbridge-power handled, by subcommand and result",
                      prometheus::MetricType::Counter);
  auto seconds = Family("k8sbridge_power_call_seconds", "Time of k8sbridge-power's runs",
                        prometheus::MetricType::Summary);
  for (const auto& entry : *counters) {
    // Not a structured binding: clang 14 refuses one captured by a lambda.
    const std::string& subcommand = entry.first;
    const power::CallTotals& t = entry.second;
    auto labelled = [&](const char* result) {
      return std::vector<prometheus::ClientMetric::Label>{{"subcommand", subcommand},
                                                          {"result", result}};
    };
    calls.metric.push_back(Counted(labelled("ok"), t.calls_ok));
    calls.metric.push_back(Counted(labelled("failed"), t.calls_failed));
    calls.metric.push_back(Counted(labelled("error"), t.calls_error));
    nodes.metric.push_back(Counted(labelled("ok"), t.nodes_ok));
    nodes.metric.push_back(Counted(labelled("failed"), t.nodes_failed));
    prometheus::ClientMetric& took = seconds.metric.emplace_back();
    took.label = {{"subcommand", subcommand}};
    took.summary.sample_count = t.Calls();
    took.summary.sample_sum = t.seconds;
  }
  return {readable, calls, nodes, seconds};
}

std::vector<prometheus::MetricFamily> PowerMetrics::Collect() const {
  return PowerFamilies(power::ReadPowerCounters(file_));
}

}  // namespace k8sbridge::sync
