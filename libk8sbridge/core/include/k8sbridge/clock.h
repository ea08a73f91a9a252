// Time, behind an interface so that deadlines, back-off and lease logic are
// tested with a FakeClock instead of sleeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

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

// Time moves only when a test calls Advance(); SleepFor advances by itself and
// records the total slept, so back-off can be asserted exactly.
class FakeClock final : public Clock {
 public:
  Steady::time_point Now() override;
  Wall::time_point WallNow() override;
  void SleepFor(Steady::duration d) override;
  void Advance(Steady::duration d);
  Steady::duration total_slept() const;

 private:
  mutable std::mutex mu_;
  Steady::time_point steady_{};
  Wall::time_point wall_{std::chrono::seconds(1'800'000'000)};
  Steady::duration slept_{};
};

}  // namespace k8sbridge
