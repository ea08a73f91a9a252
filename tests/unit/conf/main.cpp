#define BOOST_TEST_MODULE k8sbridge conf
#include <boost/test/unit_test.hpp>
