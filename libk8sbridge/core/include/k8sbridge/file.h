// Files written so that readers never see half of one.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge {

// Writes `contents` to `path` atomically (temporary file in the same directory,
// fsync, rename): readers see the old or the new file, never a half-written one.
// The file gets exactly `mode` (the umask does not narrow it).
Status WriteFileAtomic(const std::string& path, std::string_view contents, mode_t mode);

}  // namespace k8sbridge
