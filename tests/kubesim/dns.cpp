// The DNS wire format for kubesim's cluster DNS (dns.h): requests parsed defensively,
// responses built (RFC 1035, EDNS0 as RFC 6891). The records come from dns_lookup.cpp.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "dns.h"

namespace kubesim::dns {

namespace {

constexpr size_t kHeaderSize = 12;
constexpr size_t kMaxName = 255;  // octets on the wire, root label included
constexpr size_t kMaxLabel = 63;
constexpr int kMaxPointers = 64;  // compression pointers followed in one name

uint16_t Get16(std::span<const uint8_t> p, size_t at) {
  return static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
}

void Put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v & 0xff));
}

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v >> 16));
  Put16(out, static_cast<uint16_t>(v & 0xffff));
}

// A label as presentation text: '.' and '\' escaped, other unprintable octets as \DDD,
// so that no label of a request can pass for two labels of a name.
void AppendLabel(std::string& out, std::span<const uint8_t> label) {
  for (uint8_t c : label) {
    if (c == '.' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c > 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\%03u", static_cast<unsigned>(c));
      out += buf;
    }
  }
}

// Reads the name at `pos` (which moves past it) as text; `wire` gets its uncompressed
// form. False on anything malformed: out of bounds, a reserved label type, a pointer
// that does not point backwards, too many pointers, a name over 255 octets.
bool ReadName(std::span<const uint8_t> p, size_t& pos, std::string& text,
              std::vector<uint8_t>* wire) {
  size_t cur = pos;
  bool jumped = false;
  int pointers = 0;
  size_t length = 1;  // the root label
  text.clear();
  while (true) {
    if (cur >= p.size())
      return false;
    const uint8_t len = p[cur];
    if ((len & 0xc0) == 0xc0) {
      if (cur + 1 >= p.size() || ++pointers > kMaxPointers)
        return false;
      const size_t target = static_cast<size_t>(Get16(p, cur) & 0x3fff);
      if (target >= cur)
        return false;
      if (!jumped)
        pos = cur + 2;
      jumped = true;
      cur = target;
      continue;
    }
    if ((len & 0xc0) != 0)
      return false;
    if (len == 0)
      break;
    length += len + 1;
    if (len > kMaxLabel || length > kMaxName || cur + 1 + len > p.size())
      return false;
    if (!text.empty())
      text += '.';
    AppendLabel(text, p.subspan(cur + 1, len));
    if (wire != nullptr)
      wire->insert(wire->end(), p.begin() + cur, p.begin() + cur + 1 + len);
    cur += 1 + len;
  }
  if (!jumped)
    pos = cur + 1;
  if (wire != nullptr)
    wire->push_back(0);
  return true;
}

// Skips one resource record; for an OPT record fills the query's EDNS fields.
// False when it runs out of the packet or is a second (or non-root) OPT.
bool ReadRecord(std::span<const uint8_t> p, size_t& pos, bool additional, Query& query) {
  std::string name;
  if (!ReadName(p, pos, name, nullptr) || pos + 10 > p.size())
    return false;
  const uint16_t type = Get16(p, pos);
  const uint16_t klass = Get16(p, pos + 2);
  const uint32_t ttl = (static_cast<uint32_t>(Get16(p, pos + 4)) << 16) | Get16(p, pos + 6);
  const uint16_t rdlength = Get16(p, pos + 8);
  pos += 10;
  if (pos + rdlength > p.size())
    return false;
  pos += rdlength;
  if (type != kTypeOPT)
    return true;
  if (!additional || query.edns || !name.empty())
    return false;
  query.edns = true;
  query.edns_size = klass;
  query.edns_version = static_cast<uint8_t>((ttl >> 16) & 0xff);
  return true;
}

}  // namespace

std::optional<ParseError> ParseQuery(std::span<const uint8_t> packet, Query& query) {
  ParseError error;
  if (packet.size() < kHeaderSize)
    return error;  // not even a header: dropped
  const uint16_t flags = Get16(packet, 2);
  if ((flags & 0x8000) != 0)
    return error;  // a response: never answered (no loops between servers)
  error.answer = true;
  error.id = query.id = Get16(packet, 0);
  error.opcode = query.opcode = static_cast<uint8_t>((flags >> 11) & 0xf);
  error.recursion_desired = query.recursion_desired = (flags & 0x0100) != 0;
  if (query.opcode != 0) {
    error.rcode = Rcode::kNotImp;
    error.reason = "opcode not implemented";
    return error;
  }
  const uint16_t qdcount = Get16(packet, 4);
  if (qdcount != 1) {
    error.reason = "not exactly one question";
    return error;
  }
  size_t pos = kHeaderSize;
  query.question_wire.clear();
  if (!ReadName(packet, pos, query.question.name, &query.question_wire) ||
      pos + 4 > packet.size()) {
    error.reason = "malformed question";
    return error;
  }
  query.question.type = Get16(packet, pos);
  query.question.klass = Get16(packet, pos + 2);
  pos += 4;
  const uint32_t other = Get16(packet, 6) + Get16(packet, 8);
  const uint16_t additional = Get16(packet, 10);
  for (uint32_t i = 0; i < other + additional; ++i) {
    if (!ReadRecord(packet, pos, i >= other, query)) {
      error.reason = "malformed record";
      return error;
    }
  }
  return std::nullopt;
}

namespace {

// Writes `name` (text, no trailing dot) uncompressed; false when a label is empty or
// over 63 octets or the name over 255. Names here come from the store or the request.
bool PutName(std::vector<uint8_t>& out, const std::string& name) {
  if (name.empty()) {
    out.push_back(0);
    return true;
  }
  if (name.size() + 2 > kMaxName)
    return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos)
      dot = name.size();
    const size_t len = dot - start;
    if (len == 0 || len > kMaxLabel)
      return false;
    out.push_back(static_cast<uint8_t>(len));
    out.insert(out.end(), name.begin() + static_cast<std::ptrdiff_t>(start),
               name.begin() + static_cast<std::ptrdiff_t>(dot));
    start = dot + 1;
  }
  out.push_back(0);
  return true;
}

bool EqualNoCase(const std::string& a, const std::string& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// A record; an owner equal to the question's name points at it (offset 12).
bool PutRecord(std::vector<uint8_t>& out, const Record& r, const std::string& qname) {
  const size_t mark = out.size();
  if (!qname.empty() && EqualNoCase(r.name, qname)) {
    Put16(out, 0xc000 | kHeaderSize);
  } else if (!PutName(out, r.name)) {
    out.resize(mark);
    return false;
  }
  Put16(out, r.type);
  Put16(out, kClassIN);
  Put32(out, r.ttl);
  Put16(out, static_cast<uint16_t>(r.rdata.size()));
  out.insert(out.end(), r.rdata.begin(), r.rdata.end());
  return true;
}

void PutHeader(std::vector<uint8_t>& out, uint16_t id, uint16_t flags, uint16_t counts[4]) {
  Put16(out, id);
  Put16(out, flags);
  for (int i = 0; i < 4; ++i)
    Put16(out, counts[i]);
}

uint16_t ResponseFlags(uint8_t opcode, bool rd, bool aa, bool tc, Rcode rcode) {
  uint16_t flags = 0x8000 | static_cast<uint16_t>((opcode & 0xf) << 11);
  flags |= aa ? 0x0400 : 0;
  flags |= tc ? 0x0200 : 0;
  flags |= rd ? 0x0100 : 0;
  // RA stays clear: this server does not recurse.
  return flags | (static_cast<uint16_t>(rcode) & 0xf);
}

// The OPT record of a response (RFC 6891): our payload size, the extended rcode's
// upper bits, version 0.
void PutOpt(std::vector<uint8_t>& out, uint8_t extended_rcode) {
  out.push_back(0);
  Put16(out, kTypeOPT);
  Put16(out, kEdnsLimit);
  Put32(out, static_cast<uint32_t>(extended_rcode) << 24);
  Put16(out, 0);
}

std::vector<uint8_t> Build(const Query& query, const Answer& answer, bool with_records) {
  std::vector<uint8_t> out;
  out.reserve(kUdpLimit);
  uint16_t counts[4] = {1, 0, 0, static_cast<uint16_t>(query.edns ? 1 : 0)};
  PutHeader(out, query.id, 0, counts);
  if (!query.question_wire.empty())
    out.insert(out.end(), query.question_wire.begin(), query.question_wire.end());
  else if (!PutName(out, query.question.name))
    out.push_back(0);
  Put16(out, query.question.type);
  Put16(out, query.question.klass);
  if (with_records) {
    for (const Record& r : answer.answers)
      counts[1] += PutRecord(out, r, query.question.name) ? 1 : 0;
    for (const Record& r : answer.authority)
      counts[2] += PutRecord(out, r, query.question.name) ? 1 : 0;
  }
  if (query.edns)
    PutOpt(out, answer.extended_rcode);
  std::vector<uint8_t> header;
  const bool tc = !with_records && !(answer.answers.empty() && answer.authority.empty());
  PutHeader(
      header, query.id,
      ResponseFlags(query.opcode, query.recursion_desired, answer.authoritative, tc, answer.rcode),
      counts);
  std::copy(header.begin(), header.end(), out.begin());
  return out;
}

// A name in rdata, uncompressed (RFC 3597 asks that for new types; it is always legal).
bool PutRdataName(std::vector<uint8_t>& out, const std::string& name) {
  const size_t mark = out.size();
  if (!PutName(out, name)) {
    out.resize(mark);
    return false;
  }
  return true;
}

}  // namespace

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<uint32_t> ParseIPv4(const std::string& text) {
  uint32_t address = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i])))
      return std::nullopt;
    uint32_t octet = 0;
    size_t digits = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 4) {
      octet = octet * 10 + static_cast<uint32_t>(text[i++] - '0');
      ++digits;
    }
    if (octet > 255 || digits > 3 || (digits > 1 && text[i - digits] == '0'))
      return std::nullopt;
    address = (address << 8) | octet;
    if (++parts < 4 && (i >= text.size() || text[i++] != '.'))
      return std::nullopt;
  }
  if (i != text.size())
    return std::nullopt;
  return address;
}

Record ARecord(const std::string& name, uint32_t ipv4) {
  Record r{name, kTypeA, kTtl, {}};
  Put32(r.rdata, ipv4);
  return r;
}

Record NameRecord(const std::string& name, uint16_t type, const std::string& target) {
  Record r{name, type, kTtl, {}};
  std::string text = Lower(target);
  if (text.size() > 1 && text.back() == '.')
    text.pop_back();  // an ExternalName may be written fully qualified
  if (!PutRdataName(r.rdata, text))
    r.rdata.clear();
  return r;
}

Record SrvRecord(const std::string& name, uint16_t port, const std::string& target) {
  Record r{name, kTypeSRV, kTtl, {}};
  Put16(r.rdata, 0);    // priority
  Put16(r.rdata, 100);  // weight, as the specification's example
  Put16(r.rdata, port);
  if (!PutRdataName(r.rdata, target))
    r.rdata.clear();
  return r;
}

// What CoreDNS's kubernetes plugin answers for its zone (ns.dns.<zone>, hostmaster.<zone>,
// refresh 7200, retry 1800, expire 86400, minimum = its TTL); the serial is fixed.
Record SoaRecord(const std::string& zone) {
  Record r{zone, kTypeSOA, kTtl, {}};
  if (!PutRdataName(r.rdata, "ns.dns." + zone) || !PutRdataName(r.rdata, "hostmaster." + zone)) {
    r.rdata.clear();
    return r;
  }
  for (uint32_t v : {1u, 7200u, 1800u, 86400u, kTtl})
    Put32(r.rdata, v);
  return r;
}

std::vector<uint8_t> BuildResponse(const Query& query, const Answer& answer, size_t limit) {
  std::vector<uint8_t> out = Build(query, answer, true);
  if (out.size() > limit)
    out = Build(query, answer, false);  // TC: the client asks again over TCP
  return out;
}

std::vector<uint8_t> BuildError(const ParseError& error) {
  std::vector<uint8_t> out;
  uint16_t counts[4] = {0, 0, 0, 0};
  PutHeader(out, error.id,
            ResponseFlags(error.opcode, error.recursion_desired, false, false, error.rcode),
            counts);
  return out;
}

}  // namespace kubesim::dns
