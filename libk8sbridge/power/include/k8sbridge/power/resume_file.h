// SLURM_RESUME_FILE: the JSON that slurmctld hands ResumeProgram (24.11 shape):
//
//   {"all_nodes_resume":"w-[0-1]",
//    "jobs":[{"extra":null,"job_id":1,"features":"h100&ib","nodes_alloc":"w-[0-1]",
//             "nodes_resume":"w-[0-1]","oversubscribe":"OK","partition":"main",
//             "reservation":null}]}
//
// The file is a memfd that vanishes when the program exits: read it first, then
// parse at leisure. Unknown fields are ignored (later Slurm versions add some);
// null strings read as "".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/log.h"
#include "k8sbridge/slurm/port.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

struct ResumeJob {
  uint32_t job_id = 0;
  std::string features;  // the job's constraint expression, "" when none
  std::string partition;
  std::string reservation;
  std::string extra;
  std::string oversubscribe;
  std::vector<std::string> nodes_alloc;   // every node of the job (expanded)
  std::vector<std::string> nodes_resume;  // the job's nodes resumed by this call
};

struct ResumeRequest {
  std::vector<std::string> all_nodes_resume;  // expanded
  std::vector<ResumeJob> jobs;
  // Added to every pod's annotations (k8sbridge-sync's reboot replacements).
  std::map<std::string, std::string> pod_annotations;

  // The jobs whose nodes_alloc contain `node` (a node may serve several jobs when
  // shared), in file order. A walk over every job's nodes: for many nodes, JobsByNode.
  std::vector<const ResumeJob*> JobsOf(std::string_view node) const;
  // JobsOf of every node at once, in one walk (a 10,000-node job's resume would walk
  // its node list once per node with JobsOf). Points into `jobs`.
  std::map<std::string, std::vector<const ResumeJob*>, std::less<>> JobsByNode() const;
};

// `source` names the input in errors (e.g. the SLURM_RESUME_FILE path).
Result<ResumeRequest> ParseResumeFile(std::string_view json, std::string_view source,
                                      const Hostlists& hostlists);

// Reads the whole file at `path` (a /proc/<pid>/fd/N memfd), so the caller can
// parse after the file is gone.
Result<std::string> ReadResumeFile(const std::string& path);

// The Slurm node reason for a failure: BridgeReason (k8sbridge/slurm/node_reason.h)
// of the Kubernetes message (Status.message) when there is one, else of the Status
// message.
std::string NodeReason(const Status& status);

// The request of a resume call from SLURM_RESUME_FILE at `path`: `text` is what
// ReadResumeFile returned at start, nullopt when the variable is not set (then an
// empty request). A file that could not be read or does not parse fails every
// node in `nodes` through `slurm` (FailNodes), so Slurm requeues their jobs now
// instead of leaving the nodes POWERING_UP until ResumeTimeout, and the error is
// returned.
Result<ResumeRequest> ResumeRequestOrFail(const std::optional<Result<std::string>>& text,
                                          std::string_view path,
                                          const std::vector<std::string>& nodes,
                                          const Hostlists& hostlists, slurm::Slurm* slurm,
                                          Logger& log);

// A resume that cannot start: each of `nodes` DOWN then POWER_DOWN with
// NodeReason(why) ("k8sbridge: ..."). `slurm` null (Slurm cannot be reached, e.g. a
// manual run without SLURM_CONF): the nodes are named in the log and left for
// ResumeTimeout.
void FailNodes(slurm::Slurm* slurm, const std::vector<std::string>& nodes, const Status& why,
               Logger& log);

}  // namespace k8sbridge::power
