#include "k8sbridge/clock.h"

#include <thread>

namespace k8sbridge {

void RealClock::SleepFor(Steady::duration d) {
  std::this_thread::sleep_for(d);
}

RealClock& RealClock::Instance() {
  static RealClock clock;
  return clock;
}

}  // namespace k8sbridge
