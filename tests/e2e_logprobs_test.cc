// Logprobs through the three processes (GenerateRequest.logprobs): greedy
// output is unchanged by asking for them; every token gets one entry, equal
// (within 1e-4) to what plain decoding (DRAFTER_NONE) reports for the same
// token and to a plain forward pass in this process, whatever the drafter;
// under greedy decoding the token is its own top-1; unary equals streaming.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/tokenizer.h"
#include "tests/e2e_harness.h"
#include "tests/test_models.h"

namespace specserve {
namespace {

using e2e::Cluster;

const char* kPrompts[] = {"def fib(n):", "import os\nimport sys\n\ndef main("};

// A streamed generation with its logprobs, one per token id.
struct LogprobRun {
  e2e::StreamResult stream;
  std::vector<v1::TokenLogprob> logprobs;
  bool aligned = true;  // every delta had one logprob per token id
};

class LogprobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    target_ = new testing::LoadedModel(testing::LoadModel(testing::BundledModel("code-target-7m.gguf")));
    auto tok = Tokenizer::FromGguf(*target_->model->file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete tokenizer_;
    delete target_;
  }
  void SetUp() override {
    ASSERT_TRUE(cluster_->ready) << cluster_->Logs();
    ASSERT_TRUE(target_->backend != nullptr);
  }

  static v1::GenerateRequest Request(const std::string& prompt, int max_tokens, v1::Drafter drafter, int k,
                                     int top) {
    v1::GenerateRequest req;
    req.set_text(prompt);
    req.set_max_tokens(max_tokens);
    req.set_drafter(drafter);
    req.set_k(k);
    if (top >= 0) {
      req.set_logprobs(true);
      req.set_top_logprobs(top);
    }
    return req;
  }

  static LogprobRun Generate(const v1::GenerateRequest& req) {
    LogprobRun r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = cluster_->stub->Generate(&ctx, req);
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
      if (msg.has_delta()) {
        const v1::Delta& d = msg.delta();
        r.stream.ids.insert(r.stream.ids.end(), d.token_ids().begin(), d.token_ids().end());
        r.stream.text += d.text();
        r.aligned = r.aligned && d.logprobs_size() == (req.logprobs() ? d.token_ids_size() : 0);
        r.logprobs.insert(r.logprobs.end(), d.logprobs().begin(), d.logprobs().end());
      } else if (msg.has_final()) {
        r.stream.final = msg.final();
      }
    }
    r.stream.status = reader->Finish();
    return r;
  }

  // log-softmax rows of a plain forward pass over prompt + ids: row i scores ids[i].
  static std::vector<std::vector<double>> PlainLogSoftmax(const std::string& prompt, const std::vector<TokenId>& ids) {
    std::vector<TokenId> feed = tokenizer_->Encode(prompt, true);
    feed.insert(feed.end(), ids.begin(), ids.end() - 1);
    Backend& b = *target_->backend;
    KvSeq seq;
    std::vector<float> logits;
    const int32_t n = static_cast<int32_t>(ids.size());
    EXPECT_TRUE(b.Forward({ForwardSeq{&seq, feed, n}}, &logits).ok());
    b.kv_pool().Release(seq);
    const int32_t vocab = b.config().vocab;
    std::vector<std::vector<double>> out(n);
    for (int32_t i = 0; i < n; ++i) {
      const float* row = logits.data() + static_cast<size_t>(i) * vocab;
      double max = -INFINITY, sum = 0;
      for (int32_t j = 0; j < vocab; ++j) max = std::max<double>(max, row[j]);
      for (int32_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - max);
      for (int32_t j = 0; j < vocab; ++j) out[i].push_back(row[j] - max - std::log(sum));
    }
    return out;
  }

  static Cluster* cluster_;
  static testing::LoadedModel* target_;
  static Tokenizer* tokenizer_;
};

Cluster* LogprobsTest::cluster_ = nullptr;
testing::LoadedModel* LogprobsTest::target_ = nullptr;
Tokenizer* LogprobsTest::tokenizer_ = nullptr;

TEST_F(LogprobsTest, GreedySpeculativeLogprobsEqualPlainDecodings) {
  constexpr int kTokens = 40;
  for (const char* prompt : kPrompts) {
    LogprobRun plain = Generate(Request(prompt, kTokens, v1::DRAFTER_NONE, 0, 5));
    ASSERT_TRUE(plain.stream.status.ok()) << plain.stream.status.error_message();
    ASSERT_EQ(plain.logprobs.size(), plain.stream.ids.size());
    const std::vector<std::vector<double>> want = PlainLogSoftmax(prompt, plain.stream.ids);
    for (v1::Drafter d : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM, v1::DRAFTER_NONE}) {
      const LogprobRun without = Generate(Request(prompt, kTokens, d, 4, -1));
      const LogprobRun with = Generate(Request(prompt, kTokens, d, 4, 5));
      ASSERT_TRUE(without.stream.status.ok() && with.stream.status.ok()) << with.stream.status.error_message();
      const std::string what = std::string(prompt) + " drafter " + v1::Drafter_Name(d);
      // (a) the output does not change.
      EXPECT_EQ(with.stream.ids, without.stream.ids) << what;
      EXPECT_EQ(with.stream.text, without.stream.text) << what;
      EXPECT_EQ(with.stream.ids, plain.stream.ids) << what;
      EXPECT_TRUE(without.logprobs.empty());
      EXPECT_TRUE(with.aligned) << what;
      ASSERT_EQ(with.logprobs.size(), with.stream.ids.size()) << what;
      for (size_t i = 0; i < with.logprobs.size(); ++i) {
        const v1::TokenLogprob& got = with.logprobs[i];
        const v1::TokenLogprob& ref = plain.logprobs[i];
        EXPECT_EQ(got.token_id(), with.stream.ids[i]);
        // (b) the plain run's value for the same token, and the plain forward pass's.
        EXPECT_NEAR(got.logprob(), ref.logprob(), 1e-4) << what << " token " << i;
        EXPECT_NEAR(got.logprob(), want[i][got.token_id()], 1e-4) << what << " token " << i;
        EXPECT_LE(got.logprob(), 0.0f);
        // (c) the greedy token is the top-1, and the alternatives are sorted.
        ASSERT_EQ(got.top_logprobs_size(), 5) << what;
        EXPECT_EQ(got.top_logprobs(0).token_id(), got.token_id()) << what << " token " << i;
        for (int j = 0; j < 5; ++j) {
          EXPECT_EQ(got.top_logprobs(j).token_id(), ref.top_logprobs(j).token_id()) << what << " token " << i;
          EXPECT_NEAR(got.top_logprobs(j).logprob(), ref.top_logprobs(j).logprob(), 1e-4);
          if (j > 0) EXPECT_GE(got.top_logprobs(j - 1).logprob(), got.top_logprobs(j).logprob());
        }
      }
    }
  }
}

TEST_F(LogprobsTest, SampledLogprobsMatchAPlainForwardPass) {
  for (int k : {0, 3}) {
    v1::GenerateRequest req = Request(kPrompts[0], 32, k ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE, k, 3);
    req.set_temperature(0.9f);
    req.set_seed(5);
    const LogprobRun r = Generate(req);
    ASSERT_TRUE(r.stream.status.ok()) << r.stream.status.error_message();
    ASSERT_EQ(r.logprobs.size(), r.stream.ids.size());
    ASSERT_FALSE(r.stream.ids.empty());
    // The raw distribution, before temperature.
    const std::vector<std::vector<double>> want = PlainLogSoftmax(kPrompts[0], r.stream.ids);
    for (size_t i = 0; i < r.logprobs.size(); ++i) {
      EXPECT_EQ(r.logprobs[i].token_id(), r.stream.ids[i]);
      EXPECT_NEAR(r.logprobs[i].logprob(), want[i][r.stream.ids[i]], 1e-4) << "k " << k << " token " << i;
      ASSERT_EQ(r.logprobs[i].top_logprobs_size(), 3);
      for (const v1::TopLogprob& a : r.logprobs[i].top_logprobs()) {
        EXPECT_NEAR(a.logprob(), want[i][a.token_id()], 1e-4);
      }
    }
  }
}

TEST_F(LogprobsTest, UnaryCarriesTheSameLogprobsAndStopsCutThem) {
  v1::GenerateRequest req = Request(kPrompts[1], 24, v1::DRAFTER_MODEL, 4, 2);
  const LogprobRun streamed = Generate(req);
  ASSERT_TRUE(streamed.stream.status.ok());
  grpc::ClientContext ctx;
  v1::GenerateUnaryResponse unary;
  ASSERT_TRUE(cluster_->stub->GenerateUnary(&ctx, req, &unary).ok());
  ASSERT_EQ(unary.logprobs_size(), unary.token_ids_size());
  ASSERT_EQ(unary.logprobs_size(), static_cast<int>(streamed.logprobs.size()));
  for (int i = 0; i < unary.logprobs_size(); ++i) {
    EXPECT_EQ(unary.logprobs(i).token_id(), unary.token_ids(i));
    EXPECT_EQ(unary.logprobs(i).logprob(), streamed.logprobs[i].logprob());
  }
  // A stop string: the returned tokens and their logprobs end together.
  ASSERT_GT(streamed.stream.text.size(), 12u);
  req.add_stop(streamed.stream.text.substr(10, 3));
  const LogprobRun stopped = Generate(req);
  ASSERT_TRUE(stopped.stream.status.ok());
  EXPECT_TRUE(stopped.aligned);
  EXPECT_EQ(stopped.logprobs.size(), stopped.stream.ids.size());
  EXPECT_LT(stopped.stream.ids.size(), streamed.stream.ids.size());
}

TEST_F(LogprobsTest, BadTopLogprobsAreInvalidArgument) {
  for (auto [logprobs, top] : {std::pair{true, 21}, std::pair{true, -1}, std::pair{false, 3}}) {
    v1::GenerateRequest req = Request(kPrompts[0], 4, v1::DRAFTER_MODEL, 4, -1);
    req.set_logprobs(logprobs);
    req.set_top_logprobs(top);
    EXPECT_EQ(Generate(req).stream.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << top;
  }
}

}  // namespace
}  // namespace specserve
