// The test clock (k8sbridge/clock.h's Clock), for unit tests only.
#pragma once

#include <functional>
#include <mutex>

#include "k8sbridge/clock.h"

namespace k8sbridge {

// Time moves only when a test calls Advance(); SleepFor advances by itself and
// records the total slept, so back-off can be asserted exactly.
class FakeClock final : public Clock {
 public:
  Steady::time_point Now() override;
  Wall::time_point WallNow() override;
  void SleepFor(Steady::duration d) override;
  void Advance(Steady::duration d);
  Steady::duration total_slept() const;
  // Runs after each SleepFor, on the sleeper's thread, with the total slept: lets a
  // test make something happen part-way through a wait. Not re-entered.
  void SetOnSleep(std::function<void(Steady::duration total_slept)> fn);

 private:
  mutable std::mutex mu_;
  Steady::time_point steady_{};
  Wall::time_point wall_{std::chrono::seconds(1'800'000'000)};
  Steady::duration slept_{};
  std::function<void(Steady::duration)> on_sleep_;
  bool in_on_sleep_ = false;
};

}  // namespace k8sbridge
