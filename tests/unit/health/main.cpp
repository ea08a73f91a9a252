#define BOOST_TEST_MODULE k8sbridge health
#include <boost/test/unit_test.hpp>
