#define BOOST_TEST_MODULE k8sbridge power
#include <boost/test/unit_test.hpp>
