// The few Slurm internals node_features_k8s.cpp calls, declared here so the plugin
// builds where only Slurm's packaged public headers exist (Debian's libslurm-dev
// ships slurm.h, slurm_errno.h, spank.h: no src/common/). slurmctld and slurmd export
// every one of them from libslurmfull, which loads the plugin.
//
// Checked: tests/unit/slurm_internals_match_test.cpp compiles these declarations
// beside a configured Slurm tree's own headers (24.11.5 in CI; -Werror makes a
// conflicting C declaration fatal) and compares types, enum values and layouts.
// Read against 26.05.3's sources (src/common/{log,read_config,xmalloc,xstring,
// bitstring,node_conf,proc_args}.h): unchanged since 24.11. A release that changes one
// gets a SLURM_VERSION_NUMBER branch here, naming the Slurm change.
#pragma once

#include <cstdint>

extern "C" {
#include "slurm/slurm.h"
}

namespace k8sbridge::slurm_abi {

// src/common/log.h: log_level_t (a C enum; only these values are used).
enum LogLevel : unsigned {
  kLogLevelInfo = 3,
  kLogLevelVerbose = 4,
  kLogLevelDebug = 5,
};

// src/common/read_config.h: what node_features_p_get_config() fills.
struct ConfigPluginParams {
  char* name;
  list_t* key_pairs;
};

extern "C" {
// src/common/xstring.h, xmalloc.h (xstrdup, the macros xstrcat and xfree).
char* xstrdup(const char* str);
void _xstrcat(char** str1, const char* str2);  // NOLINT(bugprone-reserved-identifier)
void slurm_xfree(void** item);
// src/common/log.h.
int error(const char* format, ...) __attribute__((format(printf, 1, 2)));
void warning(const char* format, ...) __attribute__((format(printf, 1, 2)));
// src/common/bitstring.h, node_conf.h, proc_args.h.
int32_t bit_set_count(bitstr_t* bits);
bitstr_t* node_conf_get_active_bitmap(void);
void print_slurm_version(void);
// src/common/read_config.h.
void add_key_pair(list_t* key_pair_list, const char* key, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
extern slurm_conf_t slurm_conf;
}

// log_var(const log_level_t, const char*, ...): bound by its symbol name, since its
// first parameter's C type (log_level_t) is declared only in Slurm's internal header.
void LogVar(LogLevel level, const char* format, ...) __asm__("log_var")
    __attribute__((format(printf, 2, 3)));

}  // namespace k8sbridge::slurm_abi
