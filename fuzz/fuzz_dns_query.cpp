// libFuzzer target: DNS requests to kubesim's cluster DNS (tests/kubesim/dns.cpp),
// which any pod can send. Parses the request; a parsed one gets a response built
// with records named after its question, which must fit the limit it was built
// for and carry the request's id.
#include <cstddef>
#include <cstdint>
#include <span>

#include "dns.h"

using namespace kubesim::dns;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Query query;
  std::optional<ParseError> error = ParseQuery(std::span<const uint8_t>(data, size), query);
  if (error) {
    if (error->answer && BuildError(*error).size() != 12)
      __builtin_trap();
    return 0;
  }
  Answer answer;
  answer.authoritative = true;
  for (uint32_t i = 0; i < size % 50; ++i)
    answer.answers.push_back(ARecord(query.question.name, 0x0ae80000u + i));
  answer.answers.push_back(NameRecord(query.question.name, kTypeCNAME, query.question.name));
  answer.authority.push_back(SoaRecord("cluster.local"));
  const size_t limit = query.edns ? kEdnsLimit : kUdpLimit;
  std::vector<uint8_t> out = BuildResponse(query, answer, limit);
  // Only a question longer than the limit can overflow it (nothing else is kept).
  if (out.size() < 12 || (out.size() > limit && query.question_wire.size() + 27 <= limit) ||
      out[0] != (query.id >> 8) || out[1] != (query.id & 0xff))
    __builtin_trap();
  return 0;
}
