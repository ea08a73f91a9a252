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
#include <memory>
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
  // Waits between acquisition attempts are retry_period * (1 + jitter * random), as
  // client-go's JitterFactor, so candidates started together do not retry in step.
  double jitter = 1.2;
  bool release_on_cancel = true;  // clear holderIdentity when Run is cancelled
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& leader)> on_new_leader;
};

// The elector talks through a client of its own, made from the one given: same
// server, credentials' source and connection pool, but its own token bucket (a busy
// informer or a bulk action cannot starve a renewal) and no retries (a renewal
// that fails is retried by the elector within the renew deadline, never after it).
class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionOptions options);
  // One attempt to acquire or renew; true if we hold the lease afterwards. The
  // attempt (a Get and a Replace) is bounded by the attempt deadline: half the renew
  // deadline, and never past the renew deadline of the last successful renewal.
  bool TryAcquireOrRenew();
  // Acquires (retrying every retry_period, jittered), leads while renewals succeed, and
  // returns when leadership is lost (no renewal within renew_deadline) or
  // `cancel` fires. Calls the callbacks on this thread.
  void Run(const CancelToken& cancel);
  // True while we hold the lease and the last successful renewal started less than
  // renew_deadline ago (on our clock): false as soon as that passes, even while a
  // renewal is still stuck in a call.
  bool IsLeader() const;
  std::string ObservedLeader() const;
  // Gives the lease up now (holderIdentity ""), if we hold it.
  void Release();

 private:
  bool Sleep(Clock::Steady::duration d, const CancelToken& cancel);
  // TryAcquireOrRenew's steps: there is no lease yet, so create one held by us;
  // or write ours over `lease` (read with holder `holder`), taking it over
  // when it was someone else's.
  // `start`: when this attempt began (its deadline and, on success, the renewal's time).
  bool CreateLease(const std::string& now_wall, const std::string& previous_holder,
                   Clock::Steady::time_point start);
  bool WriteLease(Object lease, const std::string& holder, const std::string& now_wall,
                  Clock::Steady::time_point start);
  // Remembers what we wrote: we hold the lease. Called with mu_ held.
  void HoldLease(Object written, Clock::Steady::time_point attempt_start);
  // The time budget of one attempt that starts at `start`.
  CallOptions AttemptCall(Clock::Steady::time_point start) const;
  void NoteLeader(const std::string& holder, const std::string& previous_holder);
  Client& client_;
  std::unique_ptr<Client> lease_client_;  // dedicated: own token bucket, no retries
  LeaderElectionOptions options_;
  mutable std::mutex mu_;
  std::string observed_record_;  // holder|acquire|renew|duration|transitions as last seen
  std::string observed_holder_;
  Clock::Steady::time_point observed_time_{};
  bool leader_ = false;
  Clock::Steady::time_point renewed_at_{};  // start of the last successful attempt
  Object lease_;                            // last lease read or written
};

}  // namespace k8sbridge::kube
