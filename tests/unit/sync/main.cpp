#define BOOST_TEST_MODULE k8sbridge sync
#include <boost/test/unit_test.hpp>
