// Slurm hostlist expressions ("w-[0-3,7],gpu[01-04]") behind one small interface.
//
// Why two implementations: Slurm's own parser (libslurm's slurm_hostlist_*) is the
// authority on what an expression means, so programs (ResumeProgram, SuspendProgram,
// the sync daemon) use it: SlurmHostlists in k8sbridge/slurm/libslurm_hostlists.h,
// linked through k8sbridge_libslurm_dep. Plugins loaded into slurmctld/slurmd must
// not link libslurm a second time, and unit tests should not need it, so they use
// BuiltinHostlists (below: the one-bracket-per-name subset that is
// all Slurm itself prints and all k8sbridge.conf needs, since node names there are
// DNS labels). tests/unit/slurm checks that both agree on the same expressions.
//
// CompressHostlist/ExpandHostlist are that subset (topology.conf needs no more):
// one bracketed numeric range list per name, zero padding kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge {

// Compresses names into a hostlist expression; the result is sorted by prefix and
// then numerically, and duplicates are dropped. Names with different zero padding
// ("w-01" and "w-1") stay in separate groups, as Slurm would read them.
std::string CompressHostlist(std::vector<std::string> names);

// Expands "w-[0-3,7],x,y-[01-02]" into names. Rejects unbalanced brackets, bad
// ranges and lists longer than `max_names` (untrusted input).
Result<std::vector<std::string>> ExpandHostlist(std::string_view expression,
                                                size_t max_names = 1'000'000);

class Hostlists {
 public:
  virtual ~Hostlists() = default;
  // The names in `expression`, in order, duplicates kept. Errors say what is wrong
  // with the expression (the caller adds where it came from).
  virtual Result<std::vector<std::string>> Expand(std::string_view expression) const = 0;
  // A ranged expression for `names` (sorted, duplicates dropped).
  virtual std::string Compress(const std::vector<std::string>& names) const = 0;
};

class BuiltinHostlists final : public Hostlists {
 public:
  Result<std::vector<std::string>> Expand(std::string_view expression) const override;
  std::string Compress(const std::vector<std::string>& names) const override;
};

}  // namespace k8sbridge
