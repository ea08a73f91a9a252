// What a job asks of its nodes, in the forms Slurm hands ResumeProgram: the
// `features` constraint expression of the resume file, and a node's Gres.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::slurm {

// A constraint in disjunctive normal form: the node must have every feature of at
// least one alternative. No alternatives = no constraint.
struct FeatureConstraint {
  std::vector<std::vector<std::string>> alternatives;
  // Parts that cannot be turned into a per-pod rule, and what was done instead;
  // the caller logs them.
  std::vector<std::string> notes;
};

// Parses Slurm's --constraint syntax: names, AND ('&' or ','), OR ('|'), and
// parentheses. Placement of one pod cannot express the rest, so:
//  - a count ("h100*2": only two of the job's nodes need it) drops that feature
//    from the pod's rule, with a note;
//  - a matching OR ("[leaf1|leaf2]": all nodes take the same alternative) is read
//    as a plain OR, with a note (each pod may take a different alternative).
// A syntax error (unbalanced parentheses, empty operand, a stray character) names
// the position.
Result<FeatureConstraint> ParseConstraint(std::string_view expression);

// GPUs in a node's Gres as slurmctld reports it ("gpu:8", "gpu:h100:8(S:0-1)",
// "gpu:a100:4,gpu:h100:4,shard:8", "gpu" = 1, "" = 0). Other GRES are ignored.
Result<int> GpusFromGres(std::string_view gres);

}  // namespace k8sbridge::slurm
