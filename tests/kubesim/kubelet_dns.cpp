// A pod's resolv.conf, as the kubelet's pkg/kubelet/network/dns/dns.go (GetPodDNS)
// composes it from the pod's dnsPolicy and dnsConfig, the kubelet's --cluster-dns and
// --cluster-domain and the host's resolv.conf, and as containerd's CRI plugin writes
// it (search, nameserver, options lines). docs/kubesim.md, "Cluster DNS".
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "kubelet.h"
#include "scheduler.h"  // RecordPodEvent

namespace kubesim::kubelet_internal {

namespace {

// The limits of pkg/apis/core/validation (ExpandedDNSConfig) the kubelet applies.
constexpr size_t kMaxNameservers = 3;
constexpr size_t kMaxSearchPaths = 32;
constexpr size_t kMaxSearchListChars = 2048;
constexpr size_t kMaxSearchLength = 253;  // DNS1123SubdomainMaxLength

std::vector<std::string> OmitDuplicates(const std::vector<std::string>& in) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const std::string& s : in) {
    if (seen.insert(s).second)
      out.push_back(s);
  }
  return out;
}

std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string f;
  while (in >> f)
    out.push_back(f);
  return out;
}

// mergeDNSOptions: a pod option replaces the existing one of its name. Upstream's
// order is a Go map's (random); here the existing order, then the new names.
std::vector<std::string> MergeOptions(const std::vector<std::string>& existing,
                                      const rapidjson::Value* pod_options) {
  std::vector<std::pair<std::string, std::string>> merged;
  auto set = [&merged](const std::string& name, const std::string& value) {
    for (auto& [n, v] : merged) {
      if (n == name) {
        v = value;
        return;
      }
    }
    merged.emplace_back(name, value);
  };
  for (const std::string& op : existing) {
    const size_t colon = op.find(':');
    set(op.substr(0, colon), colon == std::string::npos ? "" : op.substr(colon + 1));
  }
  if (pod_options != nullptr && pod_options->IsArray()) {
    for (const auto& op : pod_options->GetArray())
      set(Str(Member(&op, "name")), Str(Member(&op, "value")));
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : merged)
    out.push_back(value.empty() ? name : name + ":" + value);
  return out;
}

// formDNSSearchFitsLimits: at most 32 paths, none over 253 characters, the line at
// most 2048 characters (paths cut from the end).
std::vector<std::string> FitSearches(std::vector<std::string> searches, bool& exceeded) {
  if (searches.size() > kMaxSearchPaths) {
    searches.resize(kMaxSearchPaths);
    exceeded = true;
  }
  const size_t before = searches.size();
  std::erase_if(searches, [](const std::string& s) { return s.size() > kMaxSearchLength; });
  exceeded = exceeded || searches.size() != before;
  size_t line = 0;
  for (const std::string& s : searches)
    line += s.size() + (line == 0 ? 0 : 1);
  while (line > kMaxSearchListChars && !searches.empty()) {
    line -= std::min(line, searches.back().size() + 1);
    searches.pop_back();
    exceeded = true;
  }
  return searches;
}

std::vector<std::string> PodStrings(const rapidjson::Value& pod, const char* path) {
  std::vector<std::string> out;
  if (const rapidjson::Value* v = Find(pod, path); v != nullptr && v->IsArray()) {
    for (const auto& s : v->GetArray())
      out.push_back(Str(&s));
  }
  return out;
}

}  // namespace

ResolvConfig ParseResolvConf(const std::string& text) {
  ResolvConfig config;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = Fields(line);
    if (fields.empty() || fields[0].starts_with('#'))
      continue;
    if (fields[0] == "nameserver" && fields.size() >= 2) {
      config.nameservers.push_back(fields[1]);
    } else if (fields[0] == "search") {  // the last search line wins
      config.searches.clear();
      for (size_t i = 1; i < fields.size(); ++i) {
        std::string s = fields[i];
        if (s.size() > 1 && s.back() == '.')
          s.pop_back();
        config.searches.push_back(s);
      }
    } else if (fields[0] == "options") {  // so does the last options line
      config.options.assign(fields.begin() + 1, fields.end());
    }
  }
  return config;
}

std::string FormatResolvConf(const ResolvConfig& config) {
  std::string out;
  if (!config.searches.empty())
    out += fmt::format("search {}\n", fmt::join(config.searches, " "));
  for (const std::string& ns : config.nameservers)
    out += fmt::format("nameserver {}\n", ns);
  if (!config.options.empty())
    out += fmt::format("options {}\n", fmt::join(config.options, " "));
  return out;
}

PodDns ComposePodDns(const rapidjson::Value& pod, const ResolvConfig& host,
                     const std::vector<std::string>& cluster_dns,
                     const std::string& cluster_domain) {
  PodDns dns;
  dns.config = host;
  std::string policy = GetString(pod, "spec.dnsPolicy");
  const rapidjson::Value* host_network = Find(pod, "spec.hostNetwork");
  const bool on_host = host_network != nullptr && host_network->IsBool() && host_network->GetBool();
  if (policy.empty() || (policy == "ClusterFirst" && on_host))
    policy = policy.empty() ? "ClusterFirst" : "Default";  // getPodDNSType
  if (policy == "None") {
    dns.config = ResolvConfig{};
  } else if (policy != "Default" && !cluster_dns.empty()) {
    dns.config.nameservers = cluster_dns;
    if (!cluster_domain.empty()) {
      std::vector<std::string> searches = {
          fmt::format("{}.svc.{}", GetString(pod, "metadata.namespace"), cluster_domain),
          "svc." + cluster_domain, cluster_domain};
      searches.insert(searches.end(), host.searches.begin(), host.searches.end());
      dns.config.searches = OmitDuplicates(searches);
    }
    dns.config.options = {"ndots:5"};
  } else if (policy != "Default") {
    dns.events.emplace_back(
        "MissingClusterDNS",
        "pod: \"" + GetString(pod, "metadata.name") + "_" + GetString(pod, "metadata.namespace") +
            "(" + GetString(pod, "metadata.uid") +
            ")\". kubelet does not have ClusterDNS IP configured and cannot create Pod using "
            "\"ClusterFirst\" policy. Falling back to \"Default\" policy.");
  }
  if (Find(pod, "spec.dnsConfig") != nullptr) {
    std::vector<std::string> servers = dns.config.nameservers;
    for (const std::string& s : PodStrings(pod, "spec.dnsConfig.nameservers"))
      servers.push_back(s);
    dns.config.nameservers = OmitDuplicates(servers);
    std::vector<std::string> searches = dns.config.searches;
    for (const std::string& s : PodStrings(pod, "spec.dnsConfig.searches"))
      searches.push_back(s);
    dns.config.searches = OmitDuplicates(searches);
    dns.config.options = MergeOptions(dns.config.options, Find(pod, "spec.dnsConfig.options"));
  }
  FitLimits(dns);
  return dns;
}

void FitLimits(PodDns& dns) {
  if (dns.config.nameservers.size() > kMaxNameservers) {
    dns.config.nameservers.resize(kMaxNameservers);
    dns.events.emplace_back(
        "DNSConfigForming",
        fmt::format("Nameserver limits were exceeded, some nameservers have been omitted, the "
                    "applied nameserver line is: {}",
                    fmt::join(dns.config.nameservers, " ")));
  }
  bool exceeded = false;
  dns.config.searches = FitSearches(dns.config.searches, exceeded);
  if (exceeded) {
    dns.events.emplace_back(
        "DNSConfigForming",
        fmt::format("Search Line limits were exceeded, some search paths have been omitted, the "
                    "applied search line is: {}",
                    fmt::join(dns.config.searches, " ")));
  }
}

PodDns PodResolvConf(const rapidjson::Value& pod, const std::string& host_resolv_conf,
                     const std::vector<std::string>& cluster_dns,
                     const std::string& cluster_domain) {
  ResolvConfig host;
  if (!host_resolv_conf.empty()) {
    std::ifstream in(host_resolv_conf);
    std::stringstream text;
    text << in.rdbuf();
    host = ParseResolvConf(text.str());
  }
  PodDns dns = ComposePodDns(pod, host, cluster_dns, cluster_domain);
  dns.text = FormatResolvConf(dns.config);
  return dns;
}

Status WriteResolvConf(Store& store, const KubeletOptions& options, const rapidjson::Value& pod,
                       const std::string& node, const std::string& path) {
  PodDns dns = PodResolvConf(pod, options.resolv_conf, options.cluster_dns, options.cluster_domain);
  for (const auto& [reason, message] : dns.events) {
    RecordPodEvent(store, GetString(pod, "metadata.namespace"), GetString(pod, "metadata.name"),
                   GetString(pod, "metadata.uid"), "Warning", reason, message, "kubelet", node);
  }
  std::ofstream out(path);
  out << dns.text;
  out.close();
  if (!out)
    return Status::IoError(fmt::format("writing {}", path));
  return Status::Ok();
}

}  // namespace kubesim::kubelet_internal
