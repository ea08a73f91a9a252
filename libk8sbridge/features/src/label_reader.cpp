#include "k8sbridge/features/label_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/file.h"
#include "k8sbridge/kube/credentials.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/kube/program_client.h"

namespace k8sbridge::features {

// ---- caches ----

Result<std::string> FileLabelCache::Read() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return Status::NotFound(fmt::format("no label cache {} yet", path_));
    return Status::IoError(
        fmt::format("cannot read label cache {}: {}", path_, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Status FileLabelCache::Write(std::string_view content) {
  return WriteFileAtomic(path_, content, 0644).WithContext("label cache");
}

Result<std::string> MemoryLabelCache::Read() {
  if (!fail_.ok())
    return fail_;
  if (!content_)
    return Status::NotFound("no label cache yet");
  return *content_;
}

Status MemoryLabelCache::Write(std::string_view content) {
  if (!fail_.ok())
    return fail_;
  content_ = std::string(content);
  ++writes_;
  return Status::Ok();
}

void MemoryLabelCache::Set(std::string content) {
  content_ = std::move(content);
}

// ---- cache format ----

std::string EncodeLabelCache(std::string_view host_node, const Labels& labels,
                             Clock::Wall::time_point read_at) {
  kube::Object o;
  o.SetString("/node", host_node);
  o.SetString("/readAt", kube::FormatRfc3339(read_at));
  o.SetJson("/labels", "{}");
  for (const auto& [k, v] : labels) {
    // JSON pointer escaping: label keys hold '/', e.g. nvidia.com/gpu.product.
    std::string escaped;
    for (char c : k) {
      if (c == '~')
        escaped += "~0";
      else if (c == '/')
        escaped += "~1";
      else
        escaped += c;
    }
    o.SetString("/labels/" + escaped, v);
  }
  return o.ToJson() + "\n";
}

Result<CachedLabels> DecodeLabelCache(std::string_view content) {
  auto o = kube::Object::Parse(content);
  if (!o.ok())
    return o.status().WithContext("label cache is not JSON");
  CachedLabels c;
  c.host_node = o->String("/node");
  c.read_at = o->String("/readAt");
  if (c.host_node.empty() || !o->Has("/labels"))
    return Status::InvalidArgument("label cache lacks \"node\" or \"labels\"");
  for (auto& [k, v] : o->StringMap("/labels"))
    c.labels.emplace(k, v);
  return c;
}

// ---- reading ----

LabelRead ReadNodeLabels(kube::Client& client, std::string_view host_node,
                         std::chrono::milliseconds deadline, LabelCache& cache, Logger& log) {
  LabelRead out;
  kube::CallOptions call;
  call.timeout = deadline;
  auto node = client.Get(kube::kNodes, "", host_node, call);
  if (node.ok()) {
    for (auto& [k, v] : node->Labels())
      out.labels.emplace(k, v);
    out.source = LabelRead::Source::kApi;
    out.detail = fmt::format("read the labels of Kubernetes node {} from the API", host_node);
    if (Status s = cache.Write(EncodeLabelCache(host_node, out.labels, client.clock().WallNow()));
        !s.ok()) {
      log.Warning("could not update the label cache {}: {}", cache.Describe(), s.message());
    }
    log.Info("{}", out.detail);
    return out;
  }
  return ReadCachedLabels(host_node,
                          fmt::format("could not read Kubernetes node {} within {} ms ({})",
                                      host_node, deadline.count(), node.status().message()),
                          cache, log);
}

LabelRead ReadCachedLabels(std::string_view host_node, std::string_view why, LabelCache& cache,
                           Logger& log) {
  LabelRead out;
  auto content = cache.Read();
  if (!content.ok()) {
    out.detail = fmt::format(
        "{} and there is no usable label cache ({}): reporting no Kubernetes features; "
        "slurm.conf's features stay",
        why, content.status().message());
    log.Error("{}", out.detail);
    return out;
  }
  auto cached = DecodeLabelCache(*content);
  if (!cached.ok() || cached->host_node != host_node) {
    out.detail = fmt::format(
        "{}, and the label cache {} {}: reporting no Kubernetes features; slurm.conf's "
        "features stay",
        why, cache.Describe(),
        cached.ok() ? fmt::format("holds node {}, not {}", cached->host_node, host_node)
                    : "is unreadable: " + cached.status().message());
    log.Error("{}", out.detail);
    return out;
  }
  out.source = LabelRead::Source::kCache;
  out.labels = std::move(cached->labels);
  out.detail = fmt::format("{}: using the label cache {} (read at {})", why, cache.Describe(),
                           cached->read_at);
  log.Warning("{}", out.detail);
  return out;
}

std::string LabelCachePath(const conf::BridgeConfig& config, std::string_view spool_dir,
                           std::string_view slurm_node) {
  auto expand = [&](std::string_view text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 1 < text.size() && (text[i + 1] == 'n' || text[i + 1] == 'h')) {
        out += slurm_node;
        ++i;
      } else {
        out += text[i];
      }
    }
    return out;
  };
  if (!config.node_features.cache_file.empty())
    return expand(config.node_features.cache_file);
  std::string dir = expand(spool_dir);
  if (dir.empty())
    dir = "/var/spool/slurmd";
  return dir + "/k8sbridge-labels.json";
}

Result<std::unique_ptr<kube::Client>> MakeLabelClient(const conf::BridgeConfig& c, Logger& log) {
  kube::ClientOptions options = kube::ProgramClientOptions(c.kube, log);
  options.max_retries = 0;  // registration waits for one try at most
  options.connect_timeout = std::min(c.kube.connect_timeout, c.node_features.label_timeout);
  options.request_timeout = c.node_features.label_timeout;
  options.qps = 0;  // one request: no rate limit to wait on
  return kube::MakeClient(c.kube, c.file, options);
}

}  // namespace k8sbridge::features
