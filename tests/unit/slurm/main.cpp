#define BOOST_TEST_MODULE k8sbridge slurm
#include <boost/test/unit_test.hpp>
