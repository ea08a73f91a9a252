// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.
//
// Only local clocks are used: a candidate never compares its clock with the
// renewTime written by another host. It notes when (on its own steady clock) it
// last saw the lease record change, and takes the lease over only after
// leaseDuration has passed on its own clock with no change.
//
// NO FENCING: leadership is a belief, not a lock. A leader that stalls (GC pause,
// SIGSTOP, a partition) for longer than lease_duration - renew_deadline may still
// act after another candidate took over. Actions taken as leader must therefore be
// idempotent or guarded by the objects' resourceVersion (see docs/client.md).
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "k8sbridge/kube/client.h"

namespace k8sbridge::kube {

struct LeaderElectionOptions {
  std::string namespace_ = "default";
  std::string name;      // the Lease
  std::string identity;  // this candidate, unique (host name + pid)
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};
  std::chrono::seconds retry_period{2};
  bool release_on_cancel = true;  // clear holderIdentity when Run is cancelled
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& leader)> on_new_leader;
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionOptions options);
  // One attempt to acquire or renew; true if we hold the lease afterwards.
  bool TryAcquireOrRenew();
  // Acquires (retrying every retry_period), leads while renewals succeed, and
  // returns when leadership is lost (no renewal within renew_deadline) or
  // `cancel` fires. Calls the callbacks on this thread.
  void Run(const CancelToken& cancel);
  bool IsLeader() const;
  std::string ObservedLeader() const;
  // Gives the lease up now (holderIdentity ""), if we hold it.
  void Release();

 private:
  bool Sleep(Clock::Steady::duration d, const CancelToken& cancel);
  // TryAcquireOrRenew's steps: there is no lease yet, so create one held by us;
  // or write ours over `lease` (read with holder `holder`), taking it over
  // when it was someone else's.
  bool CreateLease(const std::string& now_wall, const std::string& previous_holder);
  bool WriteLease(Object lease, const std::string& holder, const std::string& now_wall);
  // Remembers what we wrote: we hold the lease. Called with mu_ held.
  void HoldLease(Object written);
  void NoteLeader(const std::string& holder, const std::string& previous_holder);
  Client& client_;
  LeaderElectionOptions options_;
  mutable std::mutex mu_;
  std::string observed_record_;  // holder|acquire|renew|duration|transitions as last seen
  std::string observed_holder_;
  Clock::Steady::time_point observed_time_{};
  bool leader_ = false;
  Object lease_;  // last lease read or written
};

}  // namespace k8sbridge::kube
