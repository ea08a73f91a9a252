// A Store + Api with the default namespaces and fake nodes, and a one-call way to send
// a request through routing and the handler: for the kubesim unit tests of API rules.
#pragma once

#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "api.h"
#include "fake_clock.h"
#include "nodes.h"
#include "store.h"
#include "test_util.h"

namespace kubesim::testing {

struct ApiFixture {
  k8sbridge::FakeClock clock;
  Store store{clock, 1000};
  Api api{store};
  std::string user_agent;  // sent with every request

  ApiFixture() {
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    for (auto& node : MakeFakeNodes(FakeNodeOptions{}))
      BOOST_REQUIRE(store.Create("nodes", "", std::move(*node)).ok());
  }

  // `target` is the path with an optional "?query".
  ApiResponse Send(const std::string& method, const std::string& target,
                   const std::string& body = "",
                   const std::string& content_type = "application/json",
                   const std::string& accept = "application/json") {
    ApiRequest request;
    request.method = method;
    size_t query = target.find('?');
    request.path = target.substr(0, query);
    if (query != std::string::npos)
      request.query = ParseQuery(target.substr(query + 1));
    request.body = body;
    request.content_type = content_type;
    request.accept = accept;
    request.user_agent = user_agent;
    Route route;
    ApiResponse routing_error;
    if (!api.ResolveRoute(request, route, routing_error))
      return routing_error;
    return api.Handle(request, route);
  }

  // The stored object, or a null pointer when there is none.
  ObjectPtr Stored(const std::string& resource, const std::string& ns, const std::string& name) {
    auto object = store.Get(resource, ns, name);
    return object.ok() ? *object : nullptr;
  }
};

}  // namespace kubesim::testing
