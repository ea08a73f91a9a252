// Slurm hostlist expressions ("w-[0-7,9],cpu-01"), in the subset that topology.conf
// needs: one bracketed numeric range list per name, zero padding kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::topology {

// Compresses names into a hostlist expression; the result is sorted by prefix and
// then numerically, and duplicates are dropped. Names with different zero padding
// ("w-01" and "w-1") stay in separate groups, as Slurm would read them.
std::string CompressHostlist(std::vector<std::string> names);

// Expands "w-[0-3,7],x,y-[01-02]" into names. Rejects unbalanced brackets, bad
// ranges and lists longer than `max_names` (untrusted input).
Result<std::vector<std::string>> ExpandHostlist(std::string_view expression,
                                                size_t max_names = 1'000'000);

}  // namespace k8sbridge::topology
