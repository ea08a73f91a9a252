// slurmd's view of its Kubernetes node: the labels of the node its pod runs on
// (K8SBRIDGE_HOST_NODE, from the downward API's spec.nodeName), read through the API
// within a short deadline, with a local cache file for when the API cannot answer.
// Registration calls this, so it must never wait longer than the deadline.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "k8sbridge/clock.h"
#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/features/features.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::features {

// Where the last labels read are kept between slurmd starts.
class LabelCache {
 public:
  virtual ~LabelCache() = default;
  virtual std::string Describe() const = 0;  // for the log: the file's path
  virtual Result<std::string> Read() = 0;    // kNotFound when there is none
  virtual Status Write(std::string_view content) = 0;
};

// A file, replaced atomically (write beside it, then rename) so a crash mid-write
// leaves the previous cache.
class FileLabelCache final : public LabelCache {
 public:
  explicit FileLabelCache(std::string path) : path_(std::move(path)) {}
  std::string Describe() const override { return path_; }
  Result<std::string> Read() override;
  Status Write(std::string_view content) override;

 private:
  std::string path_;
};

// In memory, for tests; counts writes.
class MemoryLabelCache final : public LabelCache {
 public:
  std::string Describe() const override { return "(memory)"; }
  Result<std::string> Read() override;
  Status Write(std::string_view content) override;
  void Set(std::string content);
  void Fail(Status status) { fail_ = std::move(status); }
  int writes() const { return writes_; }

 private:
  std::optional<std::string> content_;
  Status fail_;
  int writes_ = 0;
};

// The cache's content: the Kubernetes node's name and labels, and when they were
// read (UTC, RFC 3339), as JSON.
std::string EncodeLabelCache(std::string_view host_node, const Labels& labels,
                             Clock::Wall::time_point read_at);
struct CachedLabels {
  std::string host_node;
  Labels labels;
  std::string read_at;
};
Result<CachedLabels> DecodeLabelCache(std::string_view content);

struct LabelRead {
  enum class Source { kApi, kCache, kNone };
  Source source = Source::kNone;
  Labels labels;
  std::string detail;  // what happened, one line, for the log
};

// Reads `host_node`'s labels with `client` (one GET bounded by `deadline`, no
// retries); on success rewrites the cache. When the API fails or times out, uses
// the cache if it holds the same Kubernetes node (a cache from another node would
// report its hardware). Logs which source was used and why.
LabelRead ReadNodeLabels(kube::Client& client, std::string_view host_node,
                         std::chrono::milliseconds deadline, LabelCache& cache, Logger& log);

// The cache alone, when the API could not answer (`why` says how), for a cache of
// the same Kubernetes node only.
LabelRead ReadCachedLabels(std::string_view host_node, std::string_view why, LabelCache& cache,
                           Logger& log);

// The cache path: FeatureCacheFile (with %n replaced by `slurm_node`), else
// "<spool_dir>/k8sbridge-labels.json" with %n and %h in spool_dir replaced too.
std::string LabelCachePath(const conf::BridgeConfig& config, std::string_view spool_dir,
                           std::string_view slurm_node);

// A client for slurmd's label read: the k8sbridge.conf connection (Kubeconfig,
// InCluster, else $KUBECONFIG), no retries, connect and request timeouts bounded by
// FeatureLabelTimeout.
Result<std::unique_ptr<kube::Client>> MakeLabelClient(const conf::BridgeConfig& config,
                                                      Logger& log);

}  // namespace k8sbridge::features
