#define BOOST_TEST_MODULE kubesim
#include <boost/test/unit_test.hpp>
