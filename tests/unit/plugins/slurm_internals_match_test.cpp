// plugins/node_features_k8s/slurm_internals.h declares the Slurm internals the
// node_features plugin calls, so that it builds from Debian's public headers alone.
// This compiles those declarations beside the configured Slurm tree's own headers
// (-Dslurm_src): a C function declared with other parameter types is a conflicting
// C-linkage declaration (an error with -Werror), and the checks below compare the
// types, enum values and struct layout the plugin relies on.
#include <cstddef>
#include <type_traits>

#define BOOST_TEST_MODULE slurm_internals_match
#include <boost/test/unit_test.hpp>

extern "C" {
#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/proc_args.h"
#include "src/common/read_config.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
}

#include "slurm_internals.h"

namespace ours = k8sbridge::slurm_abi;

// The printf format attributes do not take part in the comparisons.
#pragma GCC diagnostic ignored "-Wignored-attributes"

template <typename A, typename B>
constexpr bool kSame = std::is_same_v<A, B>;

// Each declaration is the tree's own function (C linkage: one entity, one type).
static_assert(kSame<decltype(&::xstrdup), decltype(&ours::xstrdup)>);
static_assert(kSame<decltype(&::_xstrcat), decltype(&ours::_xstrcat)>);
static_assert(kSame<decltype(&::slurm_xfree), decltype(&ours::slurm_xfree)>);
static_assert(kSame<decltype(&::error), decltype(&ours::error)>);
static_assert(kSame<decltype(&::warning), decltype(&ours::warning)>);
static_assert(kSame<decltype(&::bit_set_count), decltype(&ours::bit_set_count)>);
static_assert(kSame<decltype(&::print_slurm_version), decltype(&ours::print_slurm_version)>);
static_assert(kSame<decltype(&::add_key_pair), decltype(&ours::add_key_pair)>);
static_assert(kSame<decltype(&::slurm_conf), decltype(&ours::slurm_conf)>);

// log_var is bound by symbol name with k8sbridge's enum as its first parameter.
static_assert(sizeof(ours::LogLevel) == sizeof(log_level_t));
static_assert(kSame<decltype(&::log_var), void (*)(const log_level_t, const char*, ...)>);

// node_features_p_get_config's parameter.
static_assert(sizeof(ours::ConfigPluginParams) == sizeof(config_plugin_params_t));
static_assert(offsetof(ours::ConfigPluginParams, name) == offsetof(config_plugin_params_t, name));
static_assert(offsetof(ours::ConfigPluginParams, key_pairs) ==
              offsetof(config_plugin_params_t, key_pairs));
static_assert(kSame<decltype(ours::ConfigPluginParams::key_pairs),
                    decltype(config_plugin_params_t::key_pairs)>);

BOOST_AUTO_TEST_CASE(log_levels_are_the_trees) {
  BOOST_TEST(static_cast<int>(ours::kLogLevelInfo) == static_cast<int>(LOG_LEVEL_INFO));
  BOOST_TEST(static_cast<int>(ours::kLogLevelVerbose) == static_cast<int>(LOG_LEVEL_VERBOSE));
  BOOST_TEST(static_cast<int>(ours::kLogLevelDebug) == static_cast<int>(LOG_LEVEL_DEBUG));
}
