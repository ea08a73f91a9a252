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
  std::lock_guard lock(mu_);
  steady_ += d;
  wall_ += std::chrono::duration_cast<Wall::duration>(d);
  slept_ += d;
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
