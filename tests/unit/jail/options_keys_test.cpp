// The option table of spank_jail (OptionTable): docs/jail.md's reference table is
// rendered from it, and its rows word every refusal.
#include <boost/test/unit_test.hpp>

#include "../key_table_checks.h"
#include "k8sbridge/jail/options.h"

namespace k8sbridge::jail {
namespace {

std::string Error(std::vector<std::string> args) {
  auto o = ParseOptions(args);
  return o.ok() ? std::string() : o.status().message();
}

BOOST_AUTO_TEST_SUITE(jail_option_keys)

BOOST_AUTO_TEST_CASE(docs_jail_md_holds_the_option_table) {
  testing::CheckDocHoldsTable("jail.md", OptionsMarkdown(), "jail/src/options.cpp");
}

BOOST_AUTO_TEST_CASE(every_option_is_named_once_documented_and_refuses_garbage) {
  testing::CheckRowsNamedOnceAndDocumented(OptionTable());
  testing::CheckRowsRefuseWithAMessage(OptionTable());
}

BOOST_AUTO_TEST_CASE(errors_name_the_option_its_value_and_the_fix) {
  BOOST_TEST(Error({"jail=/j", "identity=ldap"}) ==
             "spank_jail option identity=ldap: expected files or none");
  BOOST_TEST(Error({"jail=/j", "probe_timeout=soon"}) ==
             "spank_jail option probe_timeout=soon: expected a duration between 100ms and 600s, "
             "such as 5s or 1500ms");
  BOOST_TEST(Error({"jail=relative"}) ==
             "spank_jail option jail=relative: the path 'relative' is not an absolute path: write "
             "it starting with '/'");
  BOOST_TEST(Error({"jail=/j", "binds=/a:/b:/c"}) ==
             "spank_jail option binds=/a:/b:/c: entry '/a:/b:/c' has too many ':' fields: write "
             "SRC[:DST][:ro]");
  BOOST_TEST(Error({"jail=/j", "probe=/etc/os-release"}) ==
             "spank_jail option probe=/etc/os-release: expected a path relative to the jail "
             "without '..', such as etc/os-release");
  BOOST_TEST(Error({"jail=/j", "colour=blue"}) ==
             "spank_jail: unknown option 'colour' (valid keys: jail, binds, tmp, tmp_base, "
             "tmp_size, probe, probe_timeout, identity, drain, namespace, allow_root, "
             "allow_no_jail)");
}

BOOST_AUTO_TEST_CASE(option_names_and_words_are_case_sensitive) {
  BOOST_TEST(Error({"Jail=/j"}).find("unknown option 'Jail'") != std::string::npos);
  BOOST_TEST(Error({"jail=/j", "tmp=Private"}) ==
             "spank_jail option tmp=Private: expected private or jail");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
