// A client that goes away is not a draft failure: after an HTTP client
// disconnects mid-stream, a gRPC client cancels or its deadline passes, the
// very next request still drafts with the draft model (no fallback, the
// draft's circuit stays closed) and no fallback is counted. Real processes.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/e2e_harness.h"
#include "tests/e2e_requests.h"

namespace specserve {
namespace {

using e2e::Cluster;
using e2e::Metric;
using e2e::Scrape;
using namespace e2e::failure;

e2e::ClusterOptions WithHttp(int http_port) {
  return Options(true, {}, {"--http-listen", e2e::Loopback(http_port)});
}

// The next request right after a client left: it must draft with the model.
void ExpectModelDrafter(Cluster& c, const std::string& after) {
  e2e::StreamResult r = e2e::Generate(*c.stub, Request(24));
  ASSERT_TRUE(r.status.ok()) << after << ": " << r.status.error_message() << c.Logs();
  EXPECT_EQ(r.final.stats().drafter(), "model") << after << c.Logs();
  EXPECT_EQ(r.final.stats().fallbacks(), 0) << after;
  EXPECT_EQ(r.ids, Reference(24)) << after;
}

// A long streamed completion whose client hangs up after its first chunk.
void HttpDisconnectMidStream(int http_port) {
  httplib::Client http("127.0.0.1", http_port);
  http.set_read_timeout(60, 0);
  const std::string body =
      std::string(R"({"prompt": ")") + kPrompt +
      R"(", "max_tokens": 900, "temperature": 0, "stream": true, "speculative": {"drafter": "model", "k": 4}})";
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  httplib::Result res = http.send(req);
  EXPECT_GE(chunks, 1) << httplib::to_string(res.error());
}

TEST(E2eClientCancelTest, HttpClientDisconnectIsNotADraftFailure) {
  const int http_port = e2e::FreePort();
  Cluster c(WithHttp(http_port));
  ASSERT_TRUE(c.ready) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    HttpDisconnectMidStream(http_port);
    ExpectModelDrafter(c, "after an HTTP client disconnected");
  }
  EXPECT_LE(Metric(Scrape(c.coordinator_metrics), "specserve_drafter_fallbacks_total"), 0)
      << Scrape(c.coordinator_metrics) << c.Logs();
}

TEST(E2eClientCancelTest, GrpcCancelAndDeadlineAreNotDraftFailures) {
  Cluster c;
  ASSERT_TRUE(c.ready) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    e2e::StreamResult r = GenerateWithHook(*c.stub, Request(900), [](grpc::ClientContext& ctx) { ctx.TryCancel(); });
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
    ExpectModelDrafter(c, "after a gRPC cancel");
    r = e2e::Generate(*c.stub, Request(900), std::chrono::milliseconds(150 + 40 * i));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    ExpectModelDrafter(c, "after a gRPC deadline");
  }
  EXPECT_LE(Metric(Scrape(c.coordinator_metrics), "specserve_drafter_fallbacks_total"), 0)
      << Scrape(c.coordinator_metrics) << c.Logs();
}

// The client's deadline passes while a draft call is in flight (the draft
// stopped): the draft call's context has the same deadline, so it may end
// first; that is the request's end, not a draft failure.
TEST(E2eClientCancelTest, DeadlineDuringADraftCallIsNotADraftFailure) {
  Cluster c;
  ASSERT_TRUE(c.ready) << c.Logs();
  for (int i = 0; i < 3; ++i) {
    e2e::StreamResult r = GenerateWithHook(
        *c.stub, Request(900), [&](grpc::ClientContext&) { c.draft->Signal(SIGSTOP); }, std::chrono::milliseconds(700));
    c.draft->Signal(SIGCONT);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
    ExpectModelDrafter(c, "after a deadline during a draft call");
  }
  EXPECT_LE(Metric(Scrape(c.coordinator_metrics), "specserve_drafter_fallbacks_total"), 0)
      << Scrape(c.coordinator_metrics) << c.Logs();
}

}  // namespace
}  // namespace specserve
