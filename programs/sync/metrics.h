// What k8sbridge-sync serves on SyncMetricsListen (docs/sync.md, "Metrics"): its
// own metrics, the outcome of k8sbridge-health's runs as Slurm holds them, and the
// counts k8sbridge-power keeps in PowerMetricsFile=. Both programs run briefly
// under Slurm (HealthCheckProgram in every worker, the power programs under
// slurmscriptd) and serve nothing themselves; this daemon is the one that lives
// beside slurmctld. Every family goes through one registry, so prometheus-cpp's
// serializer is the only writer of the exposition format.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "k8sbridge/kube/client.h"
#include "k8sbridge/power/counters.h"
#include "k8sbridge/sync/loop.h"
#include "k8sbridge/sync/reconcile.h"

namespace k8sbridge::sync {

// The daemon's metrics; as the client's kube::Metrics it also follows whether the
// API server answers (the gate reads that).
class SyncMetrics final : public kube::Metrics, public DaemonMetrics {
 public:
  explicit SyncMetrics(prometheus::Registry& r);

  void RequestDone(std::string_view verb, int code, Clock::Steady::duration) override;
  const ApiAnswering& api() const { return api_; }
  void WatchRestarted(std::string_view, std::string_view reason) override;
  void SlurmLoadFailed() override { ApiError("slurm"); }
  // result: "ok", "error", or "not_due" (a live re-read showed it was no longer due).
  void Action(ActionKind kind, std::string_view result) override;
  void Reconciled(Clock::Steady::duration d) override;
  void Resumed(Clock::Steady::duration d) override;
  void Leader(bool on) override { leader_.Set(on ? 1 : 0); }
  void Fresh(std::string_view side, bool on) override;
  void Skipped(std::string_view reason) override;
  void Breaker(const std::string& group, bool open) override;
  void Census(const World& w) override;

 private:
  void ApiError(const std::string& side);

  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Family<prometheus::Gauge>& pods_;
  prometheus::Family<prometheus::Counter>& actions_;
  prometheus::Histogram& reconcile_;
  prometheus::Family<prometheus::Counter>& api_errors_;
  prometheus::Histogram& resume_;
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Gauge>& fresh_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Gauge>& breaker_;
  prometheus::Family<prometheus::Gauge>& health_drains_;
  std::map<std::string, prometheus::Gauge*> seen_states_, seen_phases_, seen_health_;
  ApiAnswering api_;
};

// Slurm nodes that k8sbridge-health drained, by whether the finding was tagged
// "[hardware]" ("true") or not ("false": jail, disk, NVML missing); both always present.
std::map<std::string, int> HealthDrains(const World& world);

// k8sbridge-power's counts as families, read from the file at every scrape.
class PowerMetrics final : public prometheus::Collectable {
 public:
  explicit PowerMetrics(std::string counters_file) : file_(std::move(counters_file)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string file_;
};

// The families of `counters`; an unreadable file gives only
// k8sbridge_power_metrics_file_readable 0.
std::vector<prometheus::MetricFamily> PowerFamilies(const Result<power::PowerCounters>& counters);

}  // namespace k8sbridge::sync
