#define BOOST_TEST_MODULE k8sbridge topology
#include <boost/test/unit_test.hpp>
