// The three processes on loopback produce exactly plain greedy decoding, for
// every drafter; streaming order, unary, stop strings, max tokens, model
// info, and /metrics agreeing with the per-request statistics.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/tokenizer.h"
#include "tests/e2e_harness.h"
#include "tests/schema_validator.h"

namespace specserve {
namespace {

using e2e::Cluster;
using e2e::Metric;
using e2e::Scrape;

const char* kPrompts[] = {
    "def fib(n):",
    "import os\nimport sys\n\ndef main(",
    "class Stack:\n    def __init__(self):\n        self.items = []\n",
};

class GenerationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    auto model = Model::Load(testing::BundledModel("code-target-7m.gguf"));
    ASSERT_TRUE(model.ok()) << model.status();
    auto tok = Tokenizer::FromGguf(*(*model)->file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete tokenizer_;
  }
  void SetUp() override { ASSERT_TRUE(cluster_->ready) << cluster_->Logs(); }

  static std::vector<TokenId> Reference(const std::string& prompt, int n) {
    return e2e::CachedGreedy(testing::BundledModel("code-target-7m.gguf"), tokenizer_->Encode(prompt, true), n,
                            tokenizer_->eos());
  }
  static v1::GenerateRequest Request(const std::string& prompt, int max_tokens, v1::Drafter drafter, int k = 4) {
    v1::GenerateRequest req;
    req.set_text(prompt);
    req.set_max_tokens(max_tokens);
    req.set_drafter(drafter);
    req.set_k(k);
    return req;
  }

  static Cluster* cluster_;
  static Tokenizer* tokenizer_;
};

Cluster* GenerationTest::cluster_ = nullptr;
Tokenizer* GenerationTest::tokenizer_ = nullptr;

TEST_F(GenerationTest, GreedyEqualsPlainDecodingForEveryDrafter) {
  constexpr int kTokens = 40;
  int64_t ahead_hits = 0;
  for (const char* prompt : kPrompts) {
    const std::vector<TokenId> want = Reference(prompt, kTokens);
    ASSERT_FALSE(want.empty());
    for (v1::Drafter d : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM, v1::DRAFTER_NONE}) {
      e2e::StreamResult r = e2e::Generate(*cluster_->stub, Request(prompt, kTokens, d));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message() << cluster_->Logs();
      EXPECT_EQ(r.ids, want) << "prompt " << prompt << " drafter " << v1::Drafter_Name(d);
      // The text is what the ids add to the prompt's text.
      std::vector<TokenId> all = tokenizer_->Encode(prompt, true);
      const size_t prompt_len = tokenizer_->Decode(all).size();
      all.insert(all.end(), want.begin(), want.end());
      EXPECT_EQ(r.text, tokenizer_->Decode(all).substr(prompt_len)) << prompt;
      ASSERT_TRUE(r.final_seen);
      EXPECT_TRUE(r.final_last);
      EXPECT_EQ(r.final.stats().tokens(), static_cast<int64_t>(r.ids.size()));
      EXPECT_EQ(r.final.stats().fallbacks(), 0);
      if (d == v1::DRAFTER_MODEL) {
        EXPECT_EQ(r.final.stats().drafter(), "model");
        EXPECT_GT(r.final.stats().drafted(), 0);
        EXPECT_LT(r.final.stats().rounds(), static_cast<int64_t>(r.ids.size()) + 1);
        ahead_hits += r.final.stats().ahead_hits();
      }
      if (d == v1::DRAFTER_NONE) {
        EXPECT_EQ(r.final.stats().drafted(), 0);
      }
    }
  }
  // Overlap is on: some rounds were answered from the block drafted ahead.
  EXPECT_GT(ahead_hits, 0);
}

// The shared cluster's coordinator runs greedy drafts with prompt lookup
// (--draft-lookup 2, the default). One without it: every greedy block comes
// from the draft model, and the output is still plain greedy decoding.
TEST_F(GenerationTest, GreedyWithoutDraftLookupIsExactToo) {
  Cluster c({.coordinator_args = {"--draft-lookup", "0"}});
  ASSERT_TRUE(c.ready) << c.Logs();
  constexpr int kTokens = 120;
  for (const char* prompt : kPrompts) {
    e2e::StreamResult r = e2e::Generate(*c.stub, Request(prompt, kTokens, v1::DRAFTER_MODEL));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message() << c.Logs();
    EXPECT_EQ(r.ids, Reference(prompt, kTokens)) << prompt;
    EXPECT_EQ(r.final.stats().drafter(), "model");
    EXPECT_EQ(r.final.stats().fallbacks(), 0);
  }
}

// --speculation-max-sessions N: plain decoding, whatever the request's K,
// while the target reports N or more sessions open. With N = 1 a request's
// own session is enough: after the first verdict (the first load report)
// every round is plain, the next request plain from its first round, and
// the output is still exact.
TEST_F(GenerationTest, SpeculationMaxSessionsDecodesPlainlyUnderLoad) {
  Cluster c({.coordinator_args = {"--speculation-max-sessions", "1"}});
  ASSERT_TRUE(c.ready) << c.Logs();
  constexpr int kTokens = 40;
  for (int i = 0; i < 2; ++i) {
    const std::string before = Scrape(c.coordinator_metrics);
    e2e::StreamResult r = e2e::Generate(*c.stub, Request(kPrompts[i], kTokens, v1::DRAFTER_MODEL, 4));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message() << c.Logs();
    EXPECT_EQ(r.ids, Reference(kPrompts[i], kTokens)) << kPrompts[i];
    const v1::GenerationStats& s = r.final.stats();
    // At most the first request's first round drafted.
    EXPECT_LE(s.drafted(), i == 0 ? 4 : 0);
    const double plain = Metric(Scrape(c.coordinator_metrics), "specserve_k_choices_total", {"reason=\"plain_load\""}) -
                         std::max(0.0, Metric(before, "specserve_k_choices_total", {"reason=\"plain_load\""}));
    EXPECT_GE(plain, s.rounds() - (i == 0 ? 1 : 0));
  }
}

TEST_F(GenerationTest, ConcurrentRequestsAreBatchedAndExact) {
  // Several sessions at once share the services' forward passes (continuous
  // batching); each must still get exactly its own greedy continuation.
  constexpr int kTokens = 120;
  std::vector<std::vector<TokenId>> want;
  for (const char* p : kPrompts) want.push_back(Reference(p, kTokens));
  std::vector<e2e::StreamResult> got(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      const v1::Drafter d = i % 2 == 0 ? v1::DRAFTER_MODEL : v1::DRAFTER_NGRAM;
      got[i] = e2e::Generate(*cluster_->stub, Request(kPrompts[i % 3], kTokens, d, 2 + static_cast<int>(i)));
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << got[i].status.error_message();
    EXPECT_EQ(got[i].ids, want[i % 3]) << "request " << i;
  }
  const std::string m = Scrape(cluster_->target_metrics);
  EXPECT_GT(Metric(m, "specserve_batch_size_sum"), Metric(m, "specserve_batch_size_count"))
      << "no forward pass held more than one session";
}

TEST_F(GenerationTest, AdaptiveKAndUnaryAgreeWithStreaming) {
  v1::GenerateRequest req = Request(kPrompts[0], 48, v1::DRAFTER_MODEL);
  req.set_adaptive_k(true);
  e2e::StreamResult streamed = e2e::Generate(*cluster_->stub, req);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  EXPECT_EQ(streamed.ids, Reference(kPrompts[0], 48));
  EXPECT_GT(streamed.deltas, 1);  // streamed round by round, not in one piece

  grpc::ClientContext ctx;
  v1::GenerateUnaryResponse unary;
  ASSERT_TRUE(cluster_->stub->GenerateUnary(&ctx, req, &unary).ok());
  EXPECT_EQ(std::vector<TokenId>(unary.token_ids().begin(), unary.token_ids().end()), streamed.ids);
  EXPECT_EQ(unary.text(), streamed.text);
  EXPECT_EQ(unary.finish_reason(), streamed.final.finish_reason());
}

TEST_F(GenerationTest, StopStringEndsBeforeItAndIsNotReturned) {
  e2e::StreamResult full = e2e::Generate(*cluster_->stub, Request(kPrompts[0], 40, v1::DRAFTER_MODEL));
  ASSERT_TRUE(full.status.ok());
  const std::string stop = "fib";  // occurs in the continuation, not at its start
  const size_t at = full.text.find(stop);
  ASSERT_NE(at, std::string::npos) << full.text;
  ASSERT_GT(at, 0u);
  v1::GenerateRequest req = Request(kPrompts[0], 40, v1::DRAFTER_MODEL);
  req.add_stop(stop);
  req.add_stop("a stop string that never occurs");
  e2e::StreamResult r = e2e::Generate(*cluster_->stub, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text, full.text.substr(0, at));
  EXPECT_EQ(r.final.finish_reason(), "stop");
  // The ids returned are a prefix of the full run, without the token the stop string starts in.
  ASSERT_LE(r.ids.size(), full.ids.size());
  EXPECT_TRUE(std::equal(r.ids.begin(), r.ids.end(), full.ids.begin()));
  EXPECT_LE(tokenizer_->Decode(r.ids).size(), at + 1);
}

TEST_F(GenerationTest, StopTokenIdEndsBeforeItAndPromptTokensAreCounted) {
  e2e::StreamResult full = e2e::Generate(*cluster_->stub, Request(kPrompts[0], 40, v1::DRAFTER_MODEL));
  ASSERT_TRUE(full.status.ok());
  ASSERT_GT(full.ids.size(), 6u);
  EXPECT_EQ(full.final.stats().prompt_tokens(),
            static_cast<int64_t>(tokenizer_->Encode(kPrompts[0], /*add_bos=*/true).size()));
  // Stop on the 6th token: the first 5 (or fewer, when that token occurred
  // earlier) come back, the stop token itself does not.
  const int32_t stop = full.ids[5];
  const size_t first = std::find(full.ids.begin(), full.ids.end(), stop) - full.ids.begin();
  v1::GenerateRequest req = Request(kPrompts[0], 40, v1::DRAFTER_MODEL);
  req.add_stop_token_ids(stop);
  e2e::StreamResult r = e2e::Generate(*cluster_->stub, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids, std::vector<int32_t>(full.ids.begin(), full.ids.begin() + first));
  EXPECT_EQ(r.final.finish_reason(), "stop");
  req.add_stop_token_ids(1 << 30);  // outside the vocabulary
  EXPECT_EQ(e2e::Generate(*cluster_->stub, req).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Constraints through the services: greedy under a logit bias, penalties
// and min_tokens is, for every drafter and K, token for token what the
// plain (K = 0) constrained request gives; the rules change the output;
// bad values are INVALID_ARGUMENT naming the field.
TEST_F(GenerationTest, ConstrainedGreedyEqualsPlainConstrainedGreedy) {
  e2e::StreamResult full = e2e::Generate(*cluster_->stub, Request(kPrompts[1], 32, v1::DRAFTER_NONE, 0));
  ASSERT_TRUE(full.status.ok());
  ASSERT_GT(full.ids.size(), 8u);
  const int32_t stop = full.ids[5];
  const size_t first = std::find(full.ids.begin(), full.ids.end(), stop) - full.ids.begin();
  const auto constrained = [&](v1::Drafter drafter, int k) {
    v1::GenerateRequest req = Request(kPrompts[1], 32, drafter, k);
    (*req.mutable_logit_bias())[full.ids[0]] = -100.0f;
    (*req.mutable_logit_bias())[full.ids[3]] = 3.0f;
    req.set_presence_penalty(0.8f);
    req.set_frequency_penalty(0.4f);
    req.add_stop_token_ids(stop);
    req.set_min_tokens(static_cast<int32_t>(first) + 3);
    return req;
  };
  e2e::StreamResult plain = e2e::Generate(*cluster_->stub, constrained(v1::DRAFTER_NONE, 0));
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_NE(plain.ids, full.ids);
  EXPECT_EQ(std::count(plain.ids.begin(), plain.ids.end(), full.ids[0]), 0);
  ASSERT_GE(plain.ids.size(), first + 3);
  for (v1::Drafter drafter : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM}) {
    for (int k : {1, 4}) {
      e2e::StreamResult r = e2e::Generate(*cluster_->stub, constrained(drafter, k));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      EXPECT_EQ(r.ids, plain.ids) << "drafter " << drafter << ", K " << k;
    }
  }
  v1::GenerateRequest eos = Request(kPrompts[1], 32, v1::DRAFTER_MODEL, 4);
  eos.set_ignore_eos(true);
  (*eos.mutable_logit_bias())[tokenizer_->eos()] = 100.0f;  // would end at once
  e2e::StreamResult r = e2e::Generate(*cluster_->stub, eos);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 32u);

  const auto refused = [&](const std::function<void(v1::GenerateRequest*)>& set, const std::string& field) {
    v1::GenerateRequest req = Request(kPrompts[0], 8, v1::DRAFTER_MODEL);
    set(&req);
    e2e::StreamResult bad = e2e::Generate(*cluster_->stub, req);
    EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_NE(bad.status.error_message().find(field), std::string::npos) << bad.status.error_message();
  };
  refused([](v1::GenerateRequest* q) { (*q->mutable_logit_bias())[1 << 30] = 1.0f; }, "logit_bias");
  refused([](v1::GenerateRequest* q) { (*q->mutable_logit_bias())[3] = 200.0f; }, "logit_bias");
  refused([](v1::GenerateRequest* q) { q->set_presence_penalty(3.0f); }, "presence_penalty");
  refused([](v1::GenerateRequest* q) { q->set_frequency_penalty(-2.5f); }, "frequency_penalty");
  refused([](v1::GenerateRequest* q) { q->set_min_p(1.5f); }, "min_p");
  refused([](v1::GenerateRequest* q) { q->set_min_tokens(9); }, "min_tokens");
}

// Structured output through the services: the text is one document valid
// under the schema (then the end-of-sequence token), the same token for
// token with every drafter and K as the plain request; a schema outside the
// subset is INVALID_ARGUMENT naming json_schema.
TEST_F(GenerationTest, JsonSchemaOutputValidatesAndEqualsPlainConstrained) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8},
      "count": {"type": "integer", "minimum": 0, "maximum": 99},
      "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 3},
      "ok": {"type": "boolean"}}, "required": ["name", "count", "tags", "ok"]})";
  const auto request = [&](v1::Drafter drafter, int k) {
    v1::GenerateRequest req = Request(kPrompts[1], 120, drafter, k);
    req.set_json_schema(schema);
    return req;
  };
  e2e::StreamResult plain = e2e::Generate(*cluster_->stub, request(v1::DRAFTER_NONE, 0));
  ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_EQ(plain.final.finish_reason(), "stop") << plain.text;
  const nlohmann::json doc = nlohmann::json::parse(plain.text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << plain.text;
  ASSERT_TRUE(doc.contains("name") && doc["name"].is_string()) << plain.text;
  EXPECT_LE(doc["name"].get<std::string>().size(), 8u);
  ASSERT_TRUE(doc.contains("count") && doc["count"].is_number_integer()) << plain.text;
  EXPECT_GE(doc["count"].get<int>(), 0);
  EXPECT_LE(doc["count"].get<int>(), 99);
  ASSERT_TRUE(doc.contains("tags") && doc["tags"].is_array()) << plain.text;
  EXPECT_LE(doc["tags"].size(), 3u);
  for (const auto& t : doc["tags"]) EXPECT_TRUE(t == "a" || t == "bc") << plain.text;
  ASSERT_TRUE(doc.contains("ok") && doc["ok"].is_boolean()) << plain.text;
  EXPECT_EQ(doc.size(), 4u) << plain.text;
  for (v1::Drafter drafter : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM}) {
    for (int k : {1, 4}) {
      e2e::StreamResult r = e2e::Generate(*cluster_->stub, request(drafter, k));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      EXPECT_EQ(r.ids, plain.ids) << "drafter " << drafter << ", K " << k;
    }
  }
  v1::GenerateRequest bad = Request(kPrompts[0], 8, v1::DRAFTER_MODEL);
  bad.set_json_schema(R"({"type": "object", "patternProperties": {"x": {}}})");
  e2e::StreamResult refused = e2e::Generate(*cluster_->stub, bad);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("json_schema"), std::string::npos) << refused.status.error_message();
}

// The schema set of tests/data/schemas through the three services, sampled
// with the model drafter at K 4 (a fixed K, so that a seed gives one text):
// every output that finishes is a document Debian's python3-jsonschema
// validates, and most finish within the budget (the rest write long strings). (Not a GenerationTest, so the CUDA stage of
// tools/test.sh, which runs those, does not run it twice.)
class StructuredOutputTest : public GenerationTest {};

TEST_F(StructuredOutputTest, EverySchemaOfTheSetValidatesThroughTheServices) {
  const std::vector<std::filesystem::path> files = testing::SchemaSet();
  ASSERT_GE(files.size(), 50u);
  nlohmann::json requests = nlohmann::json::array();
  std::vector<std::string> names;
  int unfinished = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string schema = testing::ReadAll(files[i].string());
    v1::GenerateRequest req = Request("# the record as JSON\nrecord = ", 384, v1::DRAFTER_MODEL, 4);
    req.set_temperature(0.8f);
    req.set_seed(100 + i);
    req.set_json_schema(schema);
    e2e::StreamResult r = e2e::Generate(*cluster_->stub, req);
    ASSERT_TRUE(r.status.ok()) << files[i] << ": " << r.status.error_message();
    if (r.final.finish_reason() != "stop") {
      ++unfinished;
      continue;
    }
    requests.push_back({{"schema", nlohmann::json::parse(schema)}, {"doc", r.text}});
    names.push_back(files[i].filename().string());
  }
  std::printf("%zu of %zu schemas finished within 384 tokens\n", files.size() - unfinished, files.size());
  EXPECT_LE(unfinished * 5, static_cast<int>(files.size())) << unfinished << " of " << files.size() << " ran past 384 tokens";
  bool missing = false;
  std::string err;
  const std::vector<std::string> results = testing::ValidateWithJsonSchema(requests.dump(), &missing, &err);
  if (missing) SPECSERVE_MISSING_INPUT("python3-jsonschema (" + err + ")");
  ASSERT_EQ(results.size(), requests.size()) << err;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i], "") << names[i] << ": " << requests[i]["doc"].get<std::string>();
  }
}

TEST_F(GenerationTest, RequestIdComesBackInMetadataAndIsLogged) {
  for (const std::string given : {"grpc-id-1", ""}) {
    grpc::ClientContext ctx;
    if (!given.empty()) ctx.AddMetadata("x-request-id", given);
    v1::GenerateUnaryResponse resp;
    ASSERT_TRUE(cluster_->stub->GenerateUnary(&ctx, Request(kPrompts[0], 4, v1::DRAFTER_MODEL), &resp).ok());
    auto it = ctx.GetServerInitialMetadata().find("x-request-id");
    ASSERT_NE(it, ctx.GetServerInitialMetadata().end());
    const std::string id(it->second.data(), it->second.size());
    if (!given.empty()) {
      EXPECT_EQ(id, given);
    } else {
      EXPECT_EQ(id.size(), 32u);  // generated
    }
    EXPECT_NE(cluster_->coordinator->LogTail().find("grpc request_id=" + id + " GenerateUnary OK n=1 prompt_tokens="),
              std::string::npos)
        << cluster_->coordinator->LogTail();
  }
}

TEST_F(GenerationTest, MaxTokensIsExact) {
  for (int n : {1, 5, 17}) {
    e2e::StreamResult r = e2e::Generate(*cluster_->stub, Request(kPrompts[1], n, v1::DRAFTER_MODEL, 8));
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(static_cast<int>(r.ids.size()), n);
    EXPECT_EQ(r.final.finish_reason(), "length");
  }
  v1::GenerateRequest zero = Request(kPrompts[1], 0, v1::DRAFTER_MODEL);
  e2e::StreamResult r = e2e::Generate(*cluster_->stub, zero);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.ids.empty());
}

TEST_F(GenerationTest, ModelInfoComesFromTheServices) {
  grpc::ClientContext ctx;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(cluster_->stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.target_model(), "code-target-7m");
  EXPECT_EQ(info.draft_model(), "code-draft-1m");
  EXPECT_EQ(info.vocab_size(), 4096);
  EXPECT_EQ(info.context_length(), 1024);
  EXPECT_EQ(info.tokenizer(), "llama");
}

TEST_F(GenerationTest, MetricsAgreeWithRequestStatistics) {
  const std::string before = Scrape(cluster_->coordinator_metrics);
  ASSERT_FALSE(before.empty());
  auto value = [](const std::string& text, const std::string& name, const std::vector<std::string>& labels = {}) {
    return std::max(0.0, Metric(text, name, labels));
  };
  e2e::StreamResult r = e2e::Generate(*cluster_->stub, Request(kPrompts[2], 48, v1::DRAFTER_MODEL));
  ASSERT_TRUE(r.status.ok());
  const std::string after = Scrape(cluster_->coordinator_metrics);
  auto diff = [&](const std::string& name, const std::vector<std::string>& labels = {}) {
    return value(after, name, labels) - value(before, name, labels);
  };
  const v1::GenerationStats& s = r.final.stats();
  // The draft service's blocks: from the model, or looked up (greedy, --draft-lookup).
  auto drafted = [&](const std::string& name) {
    return diff(name, {"drafter=\"model\""}) + diff(name, {"drafter=\"lookup\""});
  };
  EXPECT_EQ(drafted("specserve_draft_tokens_proposed_total"), s.drafted());
  EXPECT_EQ(drafted("specserve_draft_tokens_accepted_total"), s.accepted());
  EXPECT_EQ(diff("specserve_generated_tokens_total"), s.tokens());
  EXPECT_EQ(diff("specserve_requests_total", {"status=\"ok\""}), 1);
  EXPECT_EQ(diff("specserve_accepted_length_count"), s.rounds());
  EXPECT_EQ(diff("specserve_draft_position_accepted_total"), s.accepted());
  EXPECT_EQ(diff("specserve_round_duration_seconds_count", {"phase=\"network\""}), s.rounds());
  EXPECT_EQ(diff("specserve_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(value(after, "specserve_speculation_k"), 0);
  EXPECT_EQ(diff("specserve_round_k_count"), s.rounds());
  // Every round had a drafter, and the policy's reason with it (a fixed K).
  EXPECT_EQ(diff("specserve_k_choices_total"), s.rounds());
  EXPECT_EQ(diff("specserve_k_choices_total", {"reason=\"fixed\""}), s.rounds());
  EXPECT_EQ(diff("specserve_request_duration_seconds_count"), 1);
  // The request's slot is freed when its worker returns, just after the final message.
  std::string now = after;
  for (int i = 0; i < 50 && Metric(now, "specserve_requests_running") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = Scrape(cluster_->coordinator_metrics);
  }
  EXPECT_EQ(Metric(now, "specserve_requests_running"), 0) << now;

  // The services: the session is gone, its blocks are back, the role label
  // is there. A service ends its session when the coordinator's stream
  // closes, which may land just after the client's final message: poll.
  for (auto [port, role] : {std::pair{cluster_->target_metrics, "target"}, {cluster_->draft_metrics, "draft"}}) {
    const std::string label = std::string("role=\"") + role + "\"";
    std::string m = Scrape(port);
    for (int i = 0; i < 250 && (Metric(m, "specserve_active_sessions", {label}) != 0 ||
                                Metric(m, "specserve_kv_blocks_used", {label}) != 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      m = Scrape(port);
    }
    EXPECT_EQ(Metric(m, "specserve_active_sessions", {label}), 0) << m;
    EXPECT_EQ(Metric(m, "specserve_kv_blocks_used", {label}), 0) << m;
    EXPECT_GT(Metric(m, "specserve_kv_blocks_capacity", {label}), 0) << m;
    EXPECT_GT(Metric(m, "specserve_batch_size_count", {label}), 0) << m;
    EXPECT_GT(Metric(m, "specserve_forward_duration_seconds_count", {label}), 0) << m;
    EXPECT_GE(Metric(m, "specserve_rollback_tokens_total", {label}), 0) << m;
    EXPECT_GT(Metric(m, "specserve_sessions_total", {label, "status=\"ok\""}), 0) << m;
  }
}

}  // namespace
}  // namespace specserve
