// The records of kubesim's cluster DNS, read from the store (dns.h): the Kubernetes
// DNS-based service discovery specification (kubernetes/dns docs/specification.md)
// as CoreDNS's kubernetes plugin serves it, with the differences docs/kubesim.md
// ("Cluster DNS") lists.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "dns.h"

namespace kubesim::dns {

namespace {

// `name` is `suffix` or ends with "." + suffix.
bool InDomain(const std::string& name, const std::string& suffix) {
  if (name == suffix)
    return true;
  return name.size() > suffix.size() && name.ends_with(suffix) &&
         name[name.size() - suffix.size() - 1] == '.';
}

// The labels of `name` before `suffix`, nearest to the suffix first.
std::vector<std::string> RelativeLabels(const std::string& name, const std::string& suffix) {
  std::vector<std::string> labels;
  if (name.size() == suffix.size())
    return labels;
  const std::string rel = name.substr(0, name.size() - suffix.size() - 1);
  size_t start = 0;
  while (true) {
    const size_t dot = rel.find('.', start);
    labels.push_back(rel.substr(start, dot == std::string::npos ? dot : dot - start));
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  std::reverse(labels.begin(), labels.end());
  return labels;
}

// "10.232.0.5" -> "10-232-0-5", the name CoreDNS gives an endpoint without hostname.
std::string Dashed(std::string ip) {
  std::replace(ip.begin(), ip.end(), '.', '-');
  return ip;
}

bool Headless(const rapidjson::Value& svc) {
  return GetString(svc, "spec.clusterIP") == "None";
}

// The ready addresses of a service's Endpoints (`addresses`, not `notReadyAddresses`:
// the endpoints controller puts every pod there when publishNotReadyAddresses is set).
struct EndpointAddress {
  std::string ip, name;  // name: hostname, else the dashed address
};
std::vector<EndpointAddress> ReadyAddresses(const Store& store, const std::string& ns,
                                            const std::string& svc) {
  std::vector<EndpointAddress> out;
  Result<ObjectPtr> ep = store.Get("endpoints", ns, svc);
  if (!ep.ok())
    return out;
  const rapidjson::Value* subsets = Find(**ep, "subsets");
  if (subsets == nullptr || !subsets->IsArray())
    return out;
  std::set<std::string> seen;
  for (const auto& subset : subsets->GetArray()) {
    const rapidjson::Value* addresses = Find(subset, "addresses");
    if (addresses == nullptr || !addresses->IsArray())
      continue;
    for (const auto& a : addresses->GetArray()) {
      const std::string ip = GetString(a, "ip");
      if (!ParseIPv4(ip) || !seen.insert(ip).second)
        continue;
      const std::string host = GetString(a, "hostname");
      out.push_back({ip, host.empty() ? Dashed(ip) : host});
    }
  }
  return out;
}

using Records = std::optional<std::vector<Record>>;  // nullopt: no such name

Records ServiceRecords(const Store& store, const rapidjson::Value& svc, const std::string& owner) {
  const std::string ns = GetString(svc, "metadata.namespace");
  const std::string name = GetString(svc, "metadata.name");
  if (GetString(svc, "spec.type") == "ExternalName")
    return std::vector<Record>{NameRecord(owner, kTypeCNAME, GetString(svc, "spec.externalName"))};
  if (!Headless(svc)) {
    std::optional<uint32_t> ip = ParseIPv4(GetString(svc, "spec.clusterIP"));
    if (!ip)
      return std::vector<Record>{};
    return std::vector<Record>{ARecord(owner, *ip)};
  }
  std::vector<Record> records;
  for (const EndpointAddress& a : ReadyAddresses(store, ns, name))
    records.push_back(ARecord(owner, *ParseIPv4(a.ip)));
  if (records.empty())
    return std::nullopt;  // the specification's NXDOMAIN for no ready endpoints
  return records;
}

Records EndpointRecords(const Store& store, const rapidjson::Value& svc, const std::string& label,
                        const std::string& owner) {
  if (!Headless(svc))
    return std::nullopt;
  std::vector<Record> records;
  for (const EndpointAddress& a : ReadyAddresses(store, GetString(svc, "metadata.namespace"),
                                                 GetString(svc, "metadata.name"))) {
    if (a.name == label)
      records.push_back(ARecord(owner, *ParseIPv4(a.ip)));
  }
  if (records.empty())
    return std::nullopt;
  return records;
}

// The service's ports named `port` (without its "_") with protocol `proto`.
std::vector<const rapidjson::Value*> MatchingPorts(const rapidjson::Value& svc,
                                                   const std::string& port,
                                                   const std::string& proto) {
  std::vector<const rapidjson::Value*> out;
  const rapidjson::Value* ports = Find(svc, "spec.ports");
  if (ports == nullptr || !ports->IsArray())
    return out;
  for (const auto& p : ports->GetArray()) {
    std::string protocol = GetString(p, "protocol");
    if (protocol.empty())
      protocol = "TCP";
    if (!GetString(p, "name").empty() && Lower(GetString(p, "name")) == port &&
        Lower(protocol) == proto)
      out.push_back(&p);
  }
  return out;
}

// _<port>._<proto>.<svc>: one SRV per port (ClusterIP: the service's name and port;
// headless: each ready endpoint's name and the endpoint port of that name).
Records SrvRecords(const Store& store, const rapidjson::Value& svc, const std::string& port,
                   const std::string& proto, const std::string& owner, const std::string& base) {
  std::vector<const rapidjson::Value*> ports = MatchingPorts(svc, port, proto);
  if (ports.empty())
    return std::nullopt;
  std::vector<Record> records;
  for (const rapidjson::Value* p : ports) {
    const rapidjson::Value* number = Find(*p, "port");
    if (!Headless(svc)) {
      if (number != nullptr && number->IsInt())
        records.push_back(SrvRecord(owner, static_cast<uint16_t>(number->GetInt()), base));
      continue;
    }
    const rapidjson::Value* target = Find(*p, "targetPort");
    const int target_port =
        target != nullptr && target->IsInt() ? target->GetInt() : (number ? number->GetInt() : 0);
    for (const EndpointAddress& a : ReadyAddresses(store, GetString(svc, "metadata.namespace"),
                                                   GetString(svc, "metadata.name")))
      records.push_back(SrvRecord(owner, static_cast<uint16_t>(target_port), a.name + "." + base));
  }
  return records;
}

// Names under <ns>.svc.<zone>; `labels` nearest the zone first: svc, ns, service, ...
Records ServiceTree(const Store& store, const std::vector<std::string>& labels,
                    const std::string& owner, const std::string& zone) {
  if (!store.Get("namespaces", "", labels[1]).ok())
    return std::nullopt;
  if (labels.size() == 2)
    return std::vector<Record>{};  // an existing namespace: NODATA (CoreDNS)
  Result<ObjectPtr> svc = store.Get("services", labels[1], labels[2]);
  if (!svc.ok())
    return std::nullopt;
  const std::string base = fmt::format("{}.{}.svc.{}", labels[2], labels[1], zone);
  if (labels.size() == 3)
    return ServiceRecords(store, **svc, owner);
  const bool underscore = labels[3].starts_with('_');
  if (labels.size() == 4 && underscore) {  // _<proto>.<svc>: above the SRV names
    for (const char* proto : {"_tcp", "_udp", "_sctp"}) {
      if (labels[3] == proto)
        return std::vector<Record>{};
    }
    return std::nullopt;
  }
  if (labels.size() == 4)
    return EndpointRecords(store, **svc, labels[3], owner);
  if (labels.size() == 5 && underscore && labels[4].starts_with('_'))
    return SrvRecords(store, **svc, labels[4].substr(1), labels[3].substr(1), owner, base);
  return std::nullopt;
}

Records ZoneRecords(const Store& store, const std::string& name, const std::string& owner,
                    const std::string& zone) {
  const std::vector<std::string> labels = RelativeLabels(name, zone);
  if (labels.empty())
    return std::vector<Record>{SoaRecord(zone)};
  if (labels[0] != "svc")
    return std::nullopt;  // pod records (<a-b-c-d>.<ns>.pod) are not served
  if (labels.size() == 1)
    return std::vector<Record>{};
  return ServiceTree(store, labels, owner, zone);
}

// <d>.<c>.<b>.<a>.in-addr.arpa: the services with that ClusterIP and the headless
// services' endpoints with that address. nullopt when nothing has it.
Records ReverseRecords(const Store& store, const std::string& name, const std::string& owner,
                       const std::string& zone) {
  std::vector<std::string> octets = RelativeLabels(name, "in-addr.arpa");
  if (octets.size() != 4)
    return std::nullopt;
  const std::string ip = fmt::format("{}", fmt::join(octets, "."));
  if (!ParseIPv4(ip))
    return std::nullopt;
  std::vector<Record> records;
  for (const ObjectPtr& svc : store.List("services", "").items) {
    const std::string svc_name = GetString(*svc, "metadata.name");
    const std::string ns = GetString(*svc, "metadata.namespace");
    const std::string base = fmt::format("{}.{}.svc.{}", svc_name, ns, zone);
    if (GetString(*svc, "spec.clusterIP") == ip)
      records.push_back(NameRecord(owner, kTypePTR, base));
    if (!Headless(*svc))
      continue;
    for (const EndpointAddress& a : ReadyAddresses(store, ns, svc_name)) {
      if (a.ip == ip)
        records.push_back(NameRecord(owner, kTypePTR, a.name + "." + base));
    }
  }
  if (records.empty())
    return std::nullopt;
  return records;
}

// What CoreDNS's forwarder brings back for a name that exists nowhere: kubesim has
// no upstream, so every name outside the zone is one. NXDOMAIN (not REFUSED) lets a
// resolver fail at once, as on a cluster: glibc reports REFUSED as a temporary
// failure (EAI_AGAIN), and Slurm retries such a lookup ten times, a second apart.
Answer NotHere() {
  Answer answer;
  answer.rcode = Rcode::kNxDomain;
  return answer;
}

}  // namespace

Answer Lookup(const Store& store, const Question& q, const std::string& zone) {
  Answer answer;
  const std::string name = Lower(q.name);
  if (q.klass != kClassIN && q.klass != kTypeANY) {
    answer.rcode = Rcode::kRefused;
    return answer;
  }
  Records records;
  if (InDomain(name, zone)) {
    answer.authoritative = true;
    records = ZoneRecords(store, name, q.name, zone);
  } else if (InDomain(name, "in-addr.arpa")) {
    records = ReverseRecords(store, name, q.name, zone);
    if (!records)
      return NotHere();
    answer.authoritative = true;
  } else {
    return NotHere();
  }
  if (!records)
    answer.rcode = Rcode::kNxDomain;
  for (Record& r : records.value_or(std::vector<Record>{})) {
    if (r.rdata.empty())
      continue;  // a name that does not fit the wire format
    if (q.type == kTypeANY || r.type == q.type || r.type == kTypeCNAME)
      answer.answers.push_back(std::move(r));
  }
  if (answer.answers.empty() && InDomain(name, zone))
    answer.authority.push_back(SoaRecord(zone));
  return answer;
}

std::vector<uint8_t> Respond(const Store& store, std::span<const uint8_t> packet,
                             const std::string& zone, bool udp) {
  Query query;
  if (std::optional<ParseError> error = ParseQuery(packet, query)) {
    if (!error->answer)
      return {};
    return BuildError(*error);
  }
  size_t limit = 65535;
  if (udp) {
    limit = query.edns ? std::clamp<size_t>(query.edns_size, kUdpLimit, kEdnsLimit) : kUdpLimit;
  }
  if (query.edns && query.edns_version != 0) {
    // BADVERS (16): the upper bits go in the OPT record, the header's rcode is 0.
    Answer badvers;
    badvers.extended_rcode = 1;
    return BuildResponse(query, badvers, limit);
  }
  return BuildResponse(query, Lookup(store, query.question, zone), limit);
}

}  // namespace kubesim::dns
