#define BOOST_TEST_MODULE k8sbridge features
#include <boost/test/unit_test.hpp>
