#define BOOST_TEST_MODULE k8sbridge kube client
#include <boost/test/unit_test.hpp>
