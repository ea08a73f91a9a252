// The per-job private /tmp and /var/tmp: directories on the host,
// <tmp_base>/<node>/job<id> and <tmp_base>/<node>/job<id>.var-tmp, bound over
// the jail's /tmp and /var/tmp for every task of the job and removed by the job
// epilog. The node name is part of the path because several nodes (pods, or
// the test rig's namespaces) may share one host directory.
//
// The node directory also holds the job namespace's state file and socket
// (job_ns.h), which a step trusts to hand its tasks a namespace: tmp_base and
// every directory above it must be root's and writable by nobody else (a
// sticky parent such as /tmp is fine: nobody else can rename what root made in
// it), and the node directory root's, mode 0700. Anything else is refused.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "k8sbridge/status.h"

namespace k8sbridge::jail {

std::string JobTmpPath(const std::string& tmp_base, const std::string& node, uint32_t job_id);
// The job's private /var/tmp, next to its /tmp: `job_tmp` is JobTmpPath's.
std::string JobVarTmpPath(const std::string& job_tmp);

// Creates tmp_base (mode 0700) and its missing parents (0755), and the node
// directory (0700), and checks them as above. `owner` is root in production
// (tests pass their own uid). Idempotent.
Status CreateNodeDir(const std::string& tmp_base, const std::string& node, uid_t owner = 0);

// Checks an existing node directory as above; Unavailable when it is missing.
Status CheckNodeDir(const std::string& tmp_base, const std::string& node, uid_t owner = 0);

// CreateNodeDir, then the job's /tmp and /var/tmp directories (mode 1777, like
// /tmp, owned by `owner`). Idempotent and safe when the steps of one job race.
Status CreateJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id,
                    uid_t owner = 0);

// Removes the job's /tmp and /var/tmp directories and everything in them (see
// RemoveTree). Missing directories are success.
Status RemoveJobTmp(const std::string& tmp_base, const std::string& node, uint32_t job_id,
                    uid_t owner = 0);

// Removes the directory `name` in the directory `parent_fd` and everything in
// it, iteratively: a tree of any depth (a job may leave one 20,000 levels
// deep) takes a bounded number of descriptors and no stack. Never follows a
// symlink (it is removed, its target stays), never leaves the file system
// mount it started on (a mount point below is reported and left alone). The
// walk climbs back up through ".." and checks that it arrives where it came
// from; a tree moved under it stops the walk with an error. `where` names
// `name` in messages. A missing `name` is success.
Status RemoveTree(int parent_fd, const std::string& name, const std::string& where);

}  // namespace k8sbridge::jail
