#include "k8sbridge/kube/leader.h"

#include <fmt/format.h>

namespace k8sbridge::kube {

namespace {
std::string RecordOf(const Object& lease) {
  return fmt::format("{}|{}|{}|{}|{}", lease.String("/spec/holderIdentity"),
                     lease.String("/spec/acquireTime"), lease.String("/spec/renewTime"),
                     lease.Int("/spec/leaseDurationSeconds").value_or(0),
                     lease.Int("/spec/leaseTransitions").value_or(0));
}
// The lease's own client: the caller's server and transport, its own token bucket
// (a renewal takes at most two requests a retry period) and no retries of its own.
std::unique_ptr<Client> LeaseClient(Client& client) {
  ClientOptions options = client.options();
  options.clock = &client.clock();
  options.logger = &client.logger();
  options.max_retries = 0;
  options.qps = 5;
  options.burst = 10;
  return std::make_unique<Client>(client.config(), client.transport(), options);
}
}  // namespace

LeaderElector::LeaderElector(Client& client, LeaderElectionOptions options)
    : client_(client), lease_client_(LeaseClient(client)), options_(std::move(options)) {}

bool LeaderElector::IsLeader() const {
  std::lock_guard lock(mu_);
  return leader_ && client_.clock().Now() - renewed_at_ < options_.renew_deadline;
}

CallOptions LeaderElector::AttemptCall(Clock::Steady::time_point start) const {
  auto deadline = start + options_.renew_deadline / 2;
  {
    std::lock_guard lock(mu_);
    if (leader_)
      deadline = std::min(deadline, renewed_at_ + options_.renew_deadline);
  }
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - client_.clock().Now());
  CallOptions call;
  call.timeout = std::max(left, std::chrono::milliseconds(100));
  return call;
}

std::string LeaderElector::ObservedLeader() const {
  std::lock_guard lock(mu_);
  return observed_holder_;
}

void LeaderElector::NoteLeader(const std::string& holder, const std::string& previous_holder) {
  if (holder != previous_holder && options_.on_new_leader)
    options_.on_new_leader(holder);
}

void LeaderElector::HoldLease(Object written, Clock::Steady::time_point attempt_start) {
  lease_ = std::move(written);
  observed_record_ = RecordOf(lease_);
  observed_time_ = client_.clock().Now();
  observed_holder_ = options_.identity;
  leader_ = true;
  renewed_at_ = attempt_start;
}

bool LeaderElector::CreateLease(const std::string& now_wall, const std::string& previous_holder,
                                Clock::Steady::time_point start) {
  Object lease;
  lease.SetString("/apiVersion", "coordination.k8s.io/v1");
  lease.SetString("/kind", "Lease");
  lease.SetString("/metadata/name", options_.name);
  lease.SetString("/metadata/namespace", options_.namespace_);
  lease.SetString("/spec/holderIdentity", options_.identity);
  lease.SetInt("/spec/leaseDurationSeconds", options_.lease_duration.count());
  lease.SetString("/spec/acquireTime", now_wall);
  lease.SetString("/spec/renewTime", now_wall);
  lease.SetInt("/spec/leaseTransitions", 0);
  auto created = lease_client_->Create(kLeases, options_.namespace_, lease, AttemptCall(start));
  if (!created.ok())
    return false;  // someone else created it first
  std::lock_guard lock(mu_);
  HoldLease(*created, start);
  NoteLeader(options_.identity, previous_holder);
  return true;
}

bool LeaderElector::WriteLease(Object lease, const std::string& holder, const std::string& now_wall,
                               Clock::Steady::time_point start) {
  if (holder != options_.identity) {
    lease.SetString("/spec/acquireTime", now_wall);
    lease.SetInt("/spec/leaseTransitions", lease::Transitions(lease) + 1);
  }
  lease.SetString("/spec/holderIdentity", options_.identity);
  lease.SetInt("/spec/leaseDurationSeconds", options_.lease_duration.count());
  lease.SetString("/spec/renewTime", now_wall);
  // Replace carries the resourceVersion we read: if another candidate wrote in
  // between, we get 409 and stay a follower.
  auto updated = lease_client_->Replace(kLeases, options_.namespace_, lease, AttemptCall(start));
  std::lock_guard lock(mu_);
  if (!updated.ok()) {
    // 409: someone else wrote the lease, it is no longer ours. Any other failure
    // (a stall, a 5xx) leaves us leader until the renew deadline says otherwise.
    if (updated.status().code() == Status::Code::kConflict)
      leader_ = false;
    return false;
  }
  HoldLease(*updated, start);
  return true;
}

bool LeaderElector::TryAcquireOrRenew() {
  Clock& clock = client_.clock();
  const auto start = clock.Now();
  const std::string now_wall = FormatRfc3339(clock.WallNow(), /*micros=*/true);
  auto current =
      lease_client_->Get(kLeases, options_.namespace_, options_.name, AttemptCall(start));
  std::string previous_holder;
  {
    std::lock_guard lock(mu_);
    previous_holder = observed_holder_;
  }
  if (!current.ok()) {
    if (current.status().code() != Status::Code::kNotFound) {
      client_.logger().Warning("kube: leader election: reading lease {}/{}: {}",
                               options_.namespace_, options_.name, current.status().ToString());
      return false;
    }
    return CreateLease(now_wall, previous_holder, start);
  }

  Object lease = std::move(*current);
  const std::string holder = lease::HolderIdentity(lease);
  const std::string record = RecordOf(lease);
  {
    std::lock_guard lock(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_time_ = clock.Now();  // our clock, never theirs
    }
    observed_holder_ = holder;
  }
  NoteLeader(holder, previous_holder);
  Clock::Steady::time_point observed_time;
  {
    std::lock_guard lock(mu_);
    observed_time = observed_time_;
  }
  int64_t duration = lease::DurationSeconds(lease);
  if (duration <= 0)
    duration = options_.lease_duration.count();
  if (!holder.empty() && holder != options_.identity &&
      clock.Now() < observed_time + std::chrono::seconds(duration)) {
    std::lock_guard lock(mu_);
    leader_ = false;
    return false;  // held by someone else and not yet expired by our clock
  }
  return WriteLease(std::move(lease), holder, now_wall, start);
}

bool LeaderElector::Sleep(Clock::Steady::duration d, const CancelToken& cancel) {
  Clock& clock = client_.clock();
  while (d.count() > 0) {
    if (cancel.cancelled())
      return false;
    auto step = std::min<Clock::Steady::duration>(d, std::chrono::milliseconds(100));
    clock.SleepFor(step);
    d -= step;
  }
  return !cancel.cancelled();
}

void LeaderElector::Run(const CancelToken& cancel) {
  while (!TryAcquireOrRenew()) {
    if (!Sleep(client_.Jitter(options_.retry_period, options_.jitter), cancel))
      return;
  }
  client_.logger().Info("kube: {} became leader on lease {}/{}", options_.identity,
                        options_.namespace_, options_.name);
  if (options_.on_started_leading)
    options_.on_started_leading();
  for (;;) {
    if (!Sleep(options_.retry_period, cancel))
      break;
    if (TryAcquireOrRenew())
      continue;
    if (!IsLeader())
      break;  // the renew deadline passed without a successful renewal
  }
  {
    std::lock_guard lock(mu_);
    leader_ = false;
  }
  if (cancel.cancelled() && options_.release_on_cancel)
    Release();
  client_.logger().Info("kube: {} stopped leading lease {}/{}", options_.identity,
                        options_.namespace_, options_.name);
  if (options_.on_stopped_leading)
    options_.on_stopped_leading();
}

void LeaderElector::Release() {
  Object lease;
  {
    std::lock_guard lock(mu_);
    if (lease::HolderIdentity(lease_) != options_.identity)
      return;
    lease = lease_;
    leader_ = false;
  }
  lease.SetString("/spec/holderIdentity", "");
  lease.SetInt("/spec/leaseDurationSeconds", 1);
  lease.SetString("/spec/renewTime", FormatRfc3339(client_.clock().WallNow(), true));
  CallOptions call;
  call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.renew_deadline / 2);
  auto r = lease_client_->Replace(kLeases, options_.namespace_, lease, call);
  std::lock_guard lock(mu_);
  if (r.ok())
    lease_ = *r;
}

}  // namespace k8sbridge::kube
