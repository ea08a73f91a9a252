#include <chrono>

#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "k8sbridge/clock.h"

using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(clocks)

BOOST_AUTO_TEST_CASE(fake_clock_moves_only_when_told) {
  k8sbridge::FakeClock clock;
  auto start = clock.Now();
  auto wall = clock.WallNow();
  BOOST_TEST((clock.Now() == start));
  clock.SleepFor(800ms);
  clock.Advance(2s);
  BOOST_TEST((clock.Now() - start == 2800ms));
  BOOST_TEST((clock.WallNow() - wall == 2800ms));
  BOOST_TEST((clock.total_slept() == 800ms));
}

BOOST_AUTO_TEST_SUITE_END()
