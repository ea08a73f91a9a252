#define BOOST_TEST_MODULE k8sbridge jail
#include <boost/test/unit_test.hpp>
