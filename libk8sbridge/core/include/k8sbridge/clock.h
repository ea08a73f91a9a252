// Time, behind an interface so that deadlines, back-off and lease logic are
// tested with a FakeClock instead of sleeps.
#pragma once

#include <chrono>

namespace k8sbridge {

class Clock {
 public:
  using Steady = std::chrono::steady_clock;
  using Wall = std::chrono::system_clock;

  virtual ~Clock() = default;
  virtual Steady::time_point Now() = 0;    // for deadlines and intervals
  virtual Wall::time_point WallNow() = 0;  // for timestamps sent to Kubernetes
  virtual void SleepFor(Steady::duration d) = 0;
};

class RealClock final : public Clock {
 public:
  Steady::time_point Now() override { return Steady::now(); }
  Wall::time_point WallNow() override { return Wall::now(); }
  void SleepFor(Steady::duration d) override;
  static RealClock& Instance();
};

}  // namespace k8sbridge
