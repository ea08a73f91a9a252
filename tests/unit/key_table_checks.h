// Checks every table of key rows (conf/key_table.h) gets: the docs hold the
// table rendered from the rows, and every row reads into its field and refuses a
// bad value with a message.
#pragma once

#include <algorithm>
#include <cctype>
#include <fstream>
#include <initializer_list>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/key_table.h"

namespace k8sbridge::testing {

inline std::string ReadDoc(const std::string& name) {
  std::ifstream in(std::string(K8SBRIDGE_SOURCE_ROOT) + "/docs/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks that docs/`doc` holds `table`, rendered from the rows of `rows`; on a
// mismatch the message holds the table to paste in.
inline void CheckDocHoldsTable(const std::string& doc, const std::string& table,
                               std::string_view rows) {
  BOOST_CHECK_MESSAGE(ReadDoc(doc).find(table) != std::string::npos,
                      "docs/" << doc << " does not hold the key table of " << rows
                              << "; replace its table with:\n"
                              << table);
}

// A value that no key accepts, with format braces in it, so that a fix pattern
// that would read the value as a pattern shows.
constexpr std::string_view kRefusedValue = "({0} no such value {value}";

// Every row but those that take any text (string and hostlist rows, and the
// readers named in `any_text`) refuses kRefusedValue as a bad value (not as a bug
// in the table), with a message.
template <typename R>
void CheckRowsRefuseWithAMessage(std::span<const conf::Key<R>> table,
                                 std::initializer_list<std::string_view> any_text = {}) {
  for (const conf::Key<R>& key : table) {
    R record;
    Status s = conf::ApplyKey(key, kRefusedValue, record);
    if (key.type == conf::KeyType::kString || key.type == conf::KeyType::kHostlist ||
        std::find(any_text.begin(), any_text.end(), key.name) != any_text.end())
      continue;
    BOOST_TEST(!s.ok(), key.name);
    BOOST_TEST((s.code() == Status::Code::kInvalidArgument), key.name);
    BOOST_TEST(!s.message().empty(), key.name);
  }
}

// Every row has a name of its own (in any case) and a doc line.
template <typename R>
void CheckRowsNamedOnceAndDocumented(std::span<const conf::Key<R>> table) {
  std::set<std::string> names;
  for (const conf::Key<R>& key : table) {
    std::string lower(key.name);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    BOOST_TEST(names.insert(lower).second, key.name << " is in the table twice");
    BOOST_TEST(!key.doc.empty(), key.name << " has no doc line");
  }
}

}  // namespace k8sbridge::testing
