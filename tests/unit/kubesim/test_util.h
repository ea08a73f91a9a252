// Helpers shared by the kubesim unit tests.
#pragma once

#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>

#include "api.h"
#include "store.h"

namespace kubesim::testing {

inline rapidjson::Document Json(const std::string& text) {
  auto parsed = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString() + " in " + text);
  rapidjson::Document doc;
  doc.Swap(**parsed);
  return doc;
}

inline rapidjson::Document PodJson(const std::string& name, const std::string& extra_meta = "",
                                   const std::string& node = "") {
  std::string spec = R"("containers":[{"name":"c","image":"x"}])";
  if (!node.empty())
    spec += R"(,"nodeName":")" + node + "\"";
  return Json(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + "\"" + extra_meta +
              R"(},"spec":{)" + spec + "}}");
}

// Routes and handles one request as the server would; `target` may carry a query.
inline ApiResponse CallApi(Api& api, const std::string& method, const std::string& target,
                           const std::string& body = "",
                           const std::string& content_type = "application/json",
                           const std::string& accept = "application/json",
                           const std::string& user_agent = "") {
  ApiRequest req;
  req.method = method;
  size_t q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos)
    req.query = ParseQuery(target.substr(q + 1));
  req.body = body;
  req.content_type = content_type;
  req.accept = accept;
  req.user_agent = user_agent;
  Route route;
  ApiResponse error;
  if (!api.ResolveRoute(req, route, error))
    return error;
  return api.Handle(req, route);
}

inline void CreateNamespace(Store& store, const std::string& name) {
  auto r = store.Create("namespaces", "", Json(R"({"metadata":{"name":")" + name + "\"}}"));
  BOOST_REQUIRE(r.ok());
}

}  // namespace kubesim::testing
