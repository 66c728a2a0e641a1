#pragma once
// A Router over an empty model repository in a temporary directory, called in process (no
// sockets): the fixture of the tests that check routes' statuses and bodies.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <string>

#include "apps/serve/routes.h"
#include "tests/temp_dir.h"

namespace convoy::testing {

class RouterTest : public ::testing::Test {
 protected:
  // The reply of `router` (default: the fixture's) to one request.
  serve::HttpReply call(const std::string& method, const std::string& target, const std::string& body = "",
                        serve::Router* router = nullptr) {
    serve::HttpReply out;
    out.status = 0;
    serve::HttpRequest request;
    request.method = method;
    request.target = target;
    request.body = body;
    (router ? *router : router_).handle(request, [&](serve::HttpReply r) { out = std::move(r); });
    return out;
  }

  TempDir dir_;
  serve::MetricsRegistry metrics_;
  std::ostringstream log_;
  serve::ModelRepository repository_{dir_.path(), serve::ModelControl::none, metrics_, log_, EngineOptions{}};
  std::atomic<bool> ready_{true};
  serve::Router router_{repository_, metrics_, ready_};
};

}  // namespace convoy::testing
