// Whether the job's user exists inside the jail. A task whose uid has no name
// in the jail runs with a broken environment (no $HOME, `id` errors, ssh and
// MPI launchers fail later and obscurely), so the step fails at once instead.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge::jail {

struct PasswdEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
};

// Finds `uid` in the text of a passwd(5) file. Malformed lines are skipped.
std::optional<PasswdEntry> FindUid(std::string_view passwd_text, uid_t uid);

// Checks that `uid` is in `passwd_path` (the jail's /etc/passwd as the caller
// sees it). The error names the user, the uid and the jail.
Status CheckUserInJail(const std::string& passwd_path, uid_t uid, std::string_view user_name,
                       std::string_view jail);

}  // namespace k8sbridge::jail
