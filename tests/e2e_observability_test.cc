// What operators read, on the three real processes: the build info and the
// newer metrics on every /metrics, no gauge named like a counter, JSON logs
// (one object per line), the coordinator's periodic stats line, and a W3C
// traceparent from an HTTP or gRPC request reaching the logs of all three.
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/e2e_harness.h"
#include "tests/e2e_requests.h"

namespace specserve {
namespace {

using e2e::Cluster;
using e2e::Metric;
using e2e::Scrape;
using json = nlohmann::json;
using namespace e2e::failure;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kGrpcTraceId[] = "0af7651916cd43dd8448eb211c80319c";

std::string Traceparent(const std::string& trace_id) { return "00-" + trace_id + "-00f067aa0ba902b7-01"; }

// The log's lines as JSON objects; a line that is not one fails the test.
std::vector<json> JsonLines(const e2e::Process& p) {
  std::vector<json> out;
  std::istringstream in(p.LogText());
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

// The first line with field == value (and msg == `msg` unless empty); null if none.
json Find(const std::vector<json>& lines, const std::string& field, const std::string& value,
          const std::string& msg = "") {
  for (const json& j : lines) {
    if (j.contains(field) && j[field] == value && (msg.empty() || j["msg"] == msg)) return j;
  }
  return json();
}

// Polls until `p`'s log has a line with field == value.
json WaitFor(const e2e::Process& p, const std::string& field, const std::string& value, const std::string& msg = "") {
  json j;
  for (int i = 0; i < 100 && j.is_null(); ++i) {
    j = Find(JsonLines(p), field, value, msg);
    if (j.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return j;
}

TEST(E2eObservabilityTest, BuildInfoQueueTimeAndNoGaugeNamedTotal) {
  Cluster c;
  ASSERT_TRUE(c.ready) << c.Logs();
  e2e::StreamResult r = e2e::Generate(*c.stub, Request(16));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  for (int port : {c.coordinator_metrics, c.target_metrics, c.draft_metrics}) {
    const std::string m = Scrape(port);
    EXPECT_EQ(Metric(m, "specserve_build_info", {"version=\"", "git_sha=\"", "compiler=\"", "backend=\"cpu"}), 1) << m;
    std::istringstream in(m);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("# TYPE ", 0) != 0 || line.find(" gauge") == std::string::npos) continue;
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_FALSE(name.size() > 6 && name.substr(name.size() - 6) == "_total") << "a gauge named " << name;
    }
  }
  const std::string cm = Scrape(c.coordinator_metrics);
  EXPECT_GE(Metric(cm, "specserve_queue_time_seconds_count"), 1) << cm;
  EXPECT_EQ(Metric(cm, "specserve_requests_waiting"), 0) << cm;
  EXPECT_EQ(Metric(cm, "specserve_requests_running"), 0) << cm;
  const std::string tm = Scrape(c.target_metrics);
  EXPECT_GT(Metric(tm, "specserve_kv_blocks_capacity"), 0) << tm;
  EXPECT_EQ(Metric(tm, "specserve_kv_blocks_total"), -1) << tm;
}

TEST(E2eObservabilityTest, TraceparentReachesTheLogsOfAllThreeProcesses) {
  const int http_port = e2e::FreePort();
  e2e::ClusterOptions o = Options(true, {"--log-format", "json"},
                                  {"--log-format", "json", "--stats-interval-s", "0.5", "--http-listen",
                                   e2e::Loopback(http_port)});
  o.draft_args = {"--log-format", "json"};
  Cluster c(o);
  ASSERT_TRUE(c.ready) << c.Logs();

  // HTTP: the caller's traceparent and request id.
  httplib::Client http("127.0.0.1", http_port);
  http.set_read_timeout(60, 0);
  httplib::Result res = http.Post(
      "/v1/completions", {{"traceparent", Traceparent(kTraceId)}, {"X-Request-Id", "obs-http-1"}},
      std::string(R"({"prompt": ")") + kPrompt +
          R"(", "max_tokens": 16, "temperature": 0, "speculative": {"drafter": "model", "k": 4}})",
      "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200) << res->body;
  const std::string answered = res->get_header_value("traceparent");
  EXPECT_EQ(answered.substr(0, 36), std::string("00-") + kTraceId + "-") << answered;
  EXPECT_NE(answered, Traceparent(kTraceId)) << "the coordinator's span is a child, not the caller's";

  // gRPC: traceparent in the call's metadata.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", Traceparent(kGrpcTraceId));
    ctx.AddMetadata("x-request-id", "obs-grpc-1");
    v1::GenerateUnaryResponse resp;
    grpc::Status s = c.stub->GenerateUnary(&ctx, Request(16), &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.stats().drafter(), "model");
    auto it = ctx.GetServerInitialMetadata().find("traceparent");
    ASSERT_NE(it, ctx.GetServerInitialMetadata().end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()).substr(0, 36), std::string("00-") + kGrpcTraceId + "-");
  }

  for (const char* trace : {kTraceId, kGrpcTraceId}) {
    const json coord = WaitFor(*c.coordinator, "trace_id", trace, "request");
    ASSERT_FALSE(coord.is_null()) << trace << "\n" << c.coordinator->LogText();
    EXPECT_EQ(coord["level"], "info") << coord;
    EXPECT_TRUE(coord.contains("ts") && coord.contains("request_id") && coord.contains("completion_tokens")) << coord;
    for (const e2e::Process* service : {c.target.get(), c.draft.get()}) {
      const json s = WaitFor(*service, "trace_id", trace, "session");
      ASSERT_FALSE(s.is_null()) << trace << "\n" << service->LogText();
      EXPECT_EQ(s["request_id"], coord["request_id"]) << s;
      EXPECT_EQ(s["status"], "ok") << s;
    }
  }
  EXPECT_EQ(Find(JsonLines(*c.coordinator), "trace_id", kTraceId, "request")["request_id"], "obs-http-1");
  EXPECT_EQ(Find(JsonLines(*c.coordinator), "trace_id", kGrpcTraceId, "request")["request_id"], "obs-grpc-1");

  // The periodic line, with what it promises.
  const json stats = WaitFor(*c.coordinator, "msg", "stats");
  ASSERT_FALSE(stats.is_null()) << c.coordinator->LogText();
  for (const char* key : {"tokens_per_s", "requests_running", "requests_waiting", "acceptance_rate",
                          "tokens_per_round", "interval_s"}) {
    EXPECT_TRUE(stats.contains(key) && stats[key].is_number()) << key << ": " << stats;
  }
}

}  // namespace
}  // namespace specserve
