#define BOOST_TEST_MODULE kubesim_sched
#include <boost/test/unit_test.hpp>
