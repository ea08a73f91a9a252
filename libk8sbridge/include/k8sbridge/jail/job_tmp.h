// The per-job private /tmp: a directory on the host, <tmp_base>/<node>/job<id>,
// bound over the jail's /tmp for every task of the job and removed by the job
// epilog. The node name is part of the path because several nodes (pods, or the
// test rig's namespaces) may share one host directory.
#pragma once

#include <cstdint>
#include <string>

#include "k8sbridge/status.h"

namespace k8sbridge::jail {

std::string JobTmpPath(const std::string& tmp_base, const std::string& node, uint32_t job_id);

// Creates tmp_base and the node directory (mode 0700), which also holds the
// job namespace state files (job_ns.h). Idempotent.
Status CreateNodeDir(const std::string& tmp_base, const std::string& node);

// Creates tmp_base and the node directory (mode 0700: other users never walk the
// host copies) and the job directory (mode 1777, like /tmp). Idempotent and safe
// when the steps of one job race.
Status CreateJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id);

// Removes the job directory and everything in it without following symlinks or
// crossing into other file systems. A missing directory is success.
Status RemoveJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id);

}  // namespace k8sbridge::jail
