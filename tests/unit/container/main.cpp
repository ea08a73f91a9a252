#define BOOST_TEST_MODULE k8sbridge container
#include <boost/test/unit_test.hpp>
