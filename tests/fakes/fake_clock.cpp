#include "fake_clock.h"

namespace k8sbridge {

Clock::Steady::time_point FakeClock::Now() {
  std::lock_guard lock(mu_);
  return steady_;
}

Clock::Wall::time_point FakeClock::WallNow() {
  std::lock_guard lock(mu_);
  return wall_;
}

void FakeClock::SleepFor(Steady::duration d) {
  std::function<void(Steady::duration)> hook;
  Steady::duration slept;
  {
    std::lock_guard lock(mu_);
    steady_ += d;
    wall_ += std::chrono::duration_cast<Wall::duration>(d);
    slept_ += d;
    slept = slept_;
    if (!in_on_sleep_ && on_sleep_) {
      hook = on_sleep_;
      in_on_sleep_ = true;
    }
  }
  if (hook) {
    hook(slept);
    std::lock_guard lock(mu_);
    in_on_sleep_ = false;
  }
}

void FakeClock::SetOnSleep(std::function<void(Steady::duration total_slept)> fn) {
  std::lock_guard lock(mu_);
  on_sleep_ = std::move(fn);
}

void FakeClock::Advance(Steady::duration d) {
  std::lock_guard lock(mu_);
  steady_ += d;
  wall_ += std::chrono::duration_cast<Wall::duration>(d);
}

Clock::Steady::duration FakeClock::total_slept() const {
  std::lock_guard lock(mu_);
  return slept_;
}

}  // namespace k8sbridge
