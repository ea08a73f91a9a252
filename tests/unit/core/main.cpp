#define BOOST_TEST_MODULE k8sbridge core
#include <boost/test/unit_test.hpp>
