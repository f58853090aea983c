// The pieces of the servers' observability that need no process: W3C
// traceparent parsing, the log line formats, the periodic stats line's
// arithmetic and the build info.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/build_info.h"
#include "common/log.h"
#include "common/trace_context.h"
#include "coordinator/stats_log.h"

namespace specserve {
namespace {

constexpr char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, ParsesValidAndRejectsInvalid) {
  std::optional<TraceContext> t = ParseTraceparent(kValid);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->parent_id, "00f067aa0ba902b7");
  EXPECT_EQ(t->flags, "01");
  EXPECT_EQ(t->Header(), kValid);
  EXPECT_FALSE(ParseTraceparent(""));
  EXPECT_FALSE(ParseTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));  // zero trace id
  EXPECT_FALSE(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));  // zero parent
  EXPECT_FALSE(ParseTraceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));  // upper case
  EXPECT_FALSE(ParseTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));  // version ff
  EXPECT_FALSE(ParseTraceparent(std::string(kValid) + "-x"));                                  // 00 is 55 chars
  EXPECT_TRUE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later"));
}

TEST(TraceContextTest, ChildKeepsTheTraceAndNewTracesDiffer) {
  TraceContext in = IncomingTrace(kValid);
  EXPECT_EQ(in.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(in.parent_id, "00f067aa0ba902b7");
  EXPECT_TRUE(ParseTraceparent(in.Header()).has_value()) << in.Header();
  TraceContext a = IncomingTrace("garbage"), b = NewTrace();
  EXPECT_TRUE(ParseTraceparent(a.Header()).has_value()) << a.Header();
  EXPECT_NE(a.trace_id, b.trace_id);
}

TEST(LogTest, JsonLinesCarryTheRequestScope) {
  log::SetProgram("specserve-test");
  log::SetFormat(log::Format::kJson);
  std::string line;
  {
    log::RequestScope scope("req-1", "4bf92f3577b34da6a3ce929d0e0e4736");
    line = log::Render(log::Level::kWarn, "a \"quoted\"\nmessage", {{"n", 3}, {"rate", 0.5}, {"what", "x"}});
  }
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["program"], "specserve-test");
  EXPECT_EQ(j["msg"], "a \"quoted\"\nmessage");
  EXPECT_EQ(j["request_id"], "req-1");
  EXPECT_EQ(j["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(j["n"], 3);
  EXPECT_DOUBLE_EQ(j["rate"].get<double>(), 0.5);
  EXPECT_EQ(j["what"], "x");
  EXPECT_TRUE(j["ts"].get<std::string>().ends_with("Z"));
  // Outside the scope: no ids.
  j = nlohmann::json::parse(log::Render(log::Level::kInfo, "m", {}));
  EXPECT_FALSE(j.contains("request_id"));
  log::SetFormat(log::Format::kText);
  {
    log::RequestScope scope("req-2", "");
    EXPECT_EQ(log::Render(log::Level::kInfo, "hello", {{"k", 1}}), "specserve-test: hello k=1 request_id=req-2");
  }
  EXPECT_FALSE(log::ParseFormat("yaml").ok());
}

TEST(StatsLogTest, RatesSinceTheLastLine) {
  CoordinatorMetrics::Totals a{100, 10, 40, 30}, b{400, 110, 440, 330};
  std::vector<log::Field> f = StatsLog::Fields(a, b, 10.0, 3, 1);
  auto value = [&](const std::string& key) {
    for (const log::Field& x : f) {
      if (x.key == key) return std::stod(x.value);
    }
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(value("tokens_per_s"), 30.0);
  EXPECT_DOUBLE_EQ(value("requests_running"), 3);
  EXPECT_DOUBLE_EQ(value("requests_waiting"), 1);
  EXPECT_DOUBLE_EQ(value("rounds"), 100);
  EXPECT_DOUBLE_EQ(value("acceptance_rate"), 0.75);
  EXPECT_DOUBLE_EQ(value("tokens_per_round"), 3.0);
  f = StatsLog::Fields(a, a, 10.0, 0, 0);
  EXPECT_DOUBLE_EQ(value("acceptance_rate"), 0);
  EXPECT_DOUBLE_EQ(value("tokens_per_round"), 0);
}

TEST(BuildInfoTest, HasEveryLabel) {
  const BuildInfo& b = GetBuildInfo();
  EXPECT_FALSE(b.version.empty());
  EXPECT_FALSE(b.git_sha.empty());
  EXPECT_FALSE(b.compiler.empty());
  EXPECT_TRUE(b.backend == "cpu" || b.backend == "cpu+cuda") << b.backend;
}

}  // namespace
}  // namespace specserve
