// Unit tests for coordinator/call_watchdog.h: an armed ticket past its time
// TryCancel()s the call's context (a blocked stream Read returns, the call ends
// CANCELLED); a ticket disarmed in time leaves the call alone; many tickets.
// Calls go to an in-process gRPC Health service whose Watch holds the stream
// open for the number of milliseconds given as `service`.
#include "coordinator/call_watchdog.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace specserve {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class HoldingHealth final : public Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext*, const HealthCheckRequest*, HealthCheckResponse* resp) override {
    resp->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  // Sends nothing for `service` ms (or until cancelled), then one SERVING.
  grpc::Status Watch(grpc::ServerContext* ctx, const HealthCheckRequest* req,
                     grpc::ServerWriter<HealthCheckResponse>* writer) override {
    const auto until = Clock::now() + milliseconds(std::stoi(req->service()));
    while (Clock::now() < until) {
      if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      std::this_thread::sleep_for(milliseconds(2));
    }
    HealthCheckResponse resp;
    resp.set_status(HealthCheckResponse::SERVING);
    writer->Write(resp);
    return grpc::Status::OK;
  }
};

class CallWatchdogTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = Health::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(100));
  }

  struct Outcome {
    bool got_message;
    grpc::Status status;
    milliseconds took;
  };
  // A Watch call holding for `hold_ms`; `arm` runs once the call has started.
  Outcome Call(grpc::ClientContext& ctx, int hold_ms, const std::function<void()>& arm) {
    const auto start = Clock::now();
    HealthCheckRequest req;
    req.set_service(std::to_string(hold_ms));
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));  // a hung test still ends
    auto reader = stub_->Watch(&ctx, req);
    arm();
    HealthCheckResponse resp;
    Outcome out;
    out.got_message = reader->Read(&resp);
    while (reader->Read(&resp)) {
    }
    out.status = reader->Finish();
    out.took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    return out;
  }

  HoldingHealth service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(CallWatchdogTest, ArmedTicketPastItsTimeCancelsABlockedRead) {
  grpc::ClientContext ctx;
  uint64_t ticket = 0;
  const Outcome out = Call(ctx, /*hold_ms=*/15000, [&] {
    ticket = CallWatchdog::Get().Arm(&ctx, Clock::now() + milliseconds(100));
  });
  CallWatchdog::Get().Disarm(ticket);  // already fired: a no-op
  EXPECT_FALSE(out.got_message);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::CANCELLED) << out.status.error_message();
  EXPECT_GE(out.took, milliseconds(90));   // not before its time
  EXPECT_LT(out.took, milliseconds(5000));  // nor at the server's pace
}

TEST_F(CallWatchdogTest, TimeAlreadyPastCancelsAtOnce) {
  grpc::ClientContext ctx;
  uint64_t ticket = 0;
  const Outcome out = Call(ctx, 15000, [&] { ticket = CallWatchdog::Get().Arm(&ctx, Clock::now() - milliseconds(1)); });
  CallWatchdog::Get().Disarm(ticket);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(out.took, milliseconds(5000));
}

TEST_F(CallWatchdogTest, DisarmInTimeLeavesTheCallAlone) {
  grpc::ClientContext ctx;
  const Outcome out = Call(ctx, /*hold_ms=*/400, [&] {
    const uint64_t t = CallWatchdog::Get().Arm(&ctx, Clock::now() + milliseconds(100));
    CallWatchdog::Get().Disarm(t);
  });
  // The call outlived the disarmed limit and completed normally.
  EXPECT_TRUE(out.got_message);
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_GE(out.took, milliseconds(390));
}

TEST_F(CallWatchdogTest, EarlierTicketArmedLaterStillFiresOnTime) {
  // A far-off ticket first, so the watchdog sleeps towards it; the second,
  // nearer one must wake it up.
  grpc::ClientContext far_ctx;
  const uint64_t far = CallWatchdog::Get().Arm(&far_ctx, Clock::now() + std::chrono::seconds(30));
  std::this_thread::sleep_for(milliseconds(20));
  grpc::ClientContext ctx;
  uint64_t near = 0;
  const Outcome out = Call(ctx, 15000, [&] { near = CallWatchdog::Get().Arm(&ctx, Clock::now() + milliseconds(100)); });
  CallWatchdog::Get().Disarm(near);
  CallWatchdog::Get().Disarm(far);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(out.took, milliseconds(5000));
}

TEST_F(CallWatchdogTest, TicketsAreDistinctAndUnknownDisarmIsHarmless) {
  grpc::ClientContext ctx;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 100; ++i) tickets.push_back(CallWatchdog::Get().Arm(&ctx, Clock::now() + std::chrono::hours(1)));
  for (size_t i = 0; i < tickets.size(); ++i) {
    EXPECT_NE(tickets[i], 0u);
    for (size_t j = 0; j < i; ++j) ASSERT_NE(tickets[i], tickets[j]);
  }
  for (uint64_t t : tickets) CallWatchdog::Get().Disarm(t);
  CallWatchdog::Get().Disarm(tickets.back() + 1000);  // never issued
  for (uint64_t t : tickets) CallWatchdog::Get().Disarm(t);  // twice
}

TEST_F(CallWatchdogTest, ManyConcurrentCallsOnlyArmedOnesCancelled) {
  constexpr int kCalls = 16;
  std::vector<Outcome> outs(kCalls);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext ctx;
      uint64_t ticket = 0;
      // Even calls keep their ticket (staggered 50..120 ms); odd ones disarm it.
      outs[i] = Call(ctx, /*hold_ms=*/800, [&] {
        ticket = CallWatchdog::Get().Arm(&ctx, Clock::now() + milliseconds(50 + 10 * (i % 8)));
        if (i % 2 == 1) CallWatchdog::Get().Disarm(ticket);
      });
      CallWatchdog::Get().Disarm(ticket);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kCalls; ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(outs[i].status.error_code(), grpc::StatusCode::CANCELLED) << "call " << i;
      EXPECT_FALSE(outs[i].got_message) << "call " << i;
    } else {
      EXPECT_TRUE(outs[i].status.ok()) << "call " << i << ": " << outs[i].status.error_message();
      EXPECT_TRUE(outs[i].got_message) << "call " << i;
    }
  }
}

TEST_F(CallWatchdogTest, ContextCancelledBeforeItsCallStarts) {
  // Tickets on contexts with no call yet: TryCancel marks them, and a call
  // started later on a marked context ends CANCELLED at once.
  constexpr int kContexts = 40;
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  for (int i = 0; i < kContexts; ++i) {
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    const uint64_t t = CallWatchdog::Get().Arm(ctxs[i].get(), Clock::now() + milliseconds(20 + i));
    if (i % 3 == 0) CallWatchdog::Get().Disarm(t);
  }
  std::this_thread::sleep_for(milliseconds(300));
  for (int i = 0; i < kContexts; ++i) {
    HealthCheckRequest req;
    HealthCheckResponse resp;
    ctxs[i]->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    const grpc::Status st = stub_->Check(ctxs[i].get(), req, &resp);
    if (i % 3 == 0) {
      EXPECT_TRUE(st.ok()) << "context " << i << ": " << st.error_message();
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::CANCELLED) << "context " << i;
    }
  }
}

}  // namespace
}  // namespace specserve
