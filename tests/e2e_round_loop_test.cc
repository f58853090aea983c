// The round loop against the real target and draft services (child
// processes), with K changing from round to round as adaptive K does under
// load: plain rounds (K = 0, the draft is only sent the verdict's commit,
// without an answer) between speculative ones. Every round must match the same
// script run in this process round for round (the CPU arithmetic is batch-
// invariant and the draws are keyed by position), greedy output must equal
// plain decoding, and no drafter may fall back.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "coordinator/local_engines.h"
#include "coordinator/remote_engines.h"
#include "coordinator/round_loop.h"
#include "tests/e2e_harness.h"

namespace specserve {
namespace {

// K per round, cycling: speculative rounds of several K with runs of plain
// rounds between them. It starts with a speculative round, so both loops
// open their drafter at the start (a drafter first opened later opens aside
// through the services, its first drafting round a few rounds later than in
// process: tests/round_loop_commit_test.cc).
const std::vector<int32_t> kScript = {3, 0, 0, 0, 2, 4, 0, 1, 0, 5, 0, 0};

struct Outcome {
  std::vector<TokenId> tokens;
  std::vector<std::pair<int32_t, int32_t>> rounds;  // (drafted, accepted) per round
  int64_t fallbacks = 0;
};

LoopOptions Options(Outcome* run, bool overlap) {
  LoopOptions o;
  o.k = KPolicy::Scripted(kScript);
  o.overlap = overlap;
  o.on_tokens = [run](absl::Span<const TokenId> t) {
    run->tokens.insert(run->tokens.end(), t.begin(), t.end());
    return true;
  };
  o.on_round = [run](const RoundRecord& r) { run->rounds.emplace_back(r.drafted, r.accepted); };
  return o;
}

class RoundLoopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new e2e::Cluster();
    for (const char* name : {"code-target-7m.gguf", "code-draft-1m.gguf"}) {
      auto model = Model::Load(testing::BundledModel(name));
      ASSERT_TRUE(model.ok()) << model.status();
      auto backend = MakeCpuBackend(**model, BackendOptions());
      ASSERT_TRUE(backend.ok()) << backend.status();
      models_.push_back(std::move(*model));
      backends_.push_back(std::move(*backend));
    }
    auto tok = Tokenizer::FromGguf(*models_[0]->file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    prompt_ = (*tok)->Encode("def fib(n):\n    ", /*add_bos=*/true);
    eos_ = (*tok)->eos();
  }
  static void TearDownTestSuite() {
    backends_.clear();
    models_.clear();
    delete cluster_;
    cluster_ = nullptr;
  }

  SessionSpec Spec(float temperature) const {
    SessionSpec spec;
    spec.prompt = prompt_;
    spec.target.temperature = temperature;
    spec.target.seed = 7;
    spec.draft.temperature = temperature;
    spec.max_new_tokens = 48;
    return spec;
  }

  // Through the services: RemoteDrafter and RemoteVerifier, overlap on.
  Outcome Remote(const SessionSpec& spec) {
    Outcome run;
    auto tchan = grpc::CreateChannel(e2e::Loopback(cluster_->target_port), grpc::InsecureChannelCredentials());
    auto dchan = grpc::CreateChannel(e2e::Loopback(cluster_->draft_port), grpc::InsecureChannelCredentials());
    auto tstub = v1::TargetService::NewStub(tchan);
    auto dstub = v1::DraftService::NewStub(dchan);
    CancelGroup cancel;
    RemoteOptions ro;
    ro.cancel = &cancel;
    RemoteVerifier verifier(tstub.get(), ro);
    RemoteDrafter drafter(dstub.get(), ro);
    LoopOptions o = Options(&run, /*overlap=*/true);
    o.make_fallback = [&run](const absl::Status& why, bool) {
      ADD_FAILURE() << "drafter fell back: " << why;
      ++run.fallbacks;
      return std::unique_ptr<Drafter>();
    };
    absl::StatusOr<LoopStats> st = RunSpeculative(spec, &drafter, verifier, o);
    EXPECT_TRUE(st.ok()) << st.status() << cluster_->Logs();
    return run;
  }

  // The same script in this process, no overlap: the reference.
  Outcome Local(const SessionSpec& spec) {
    Outcome run;
    LoopOptions o = Options(&run, /*overlap=*/false);
    absl::StatusOr<LoopStats> st = GenerateInProcess(*backends_[0], backends_[1].get(), v1::DRAFTER_MODEL, spec, o);
    EXPECT_TRUE(st.ok()) << st.status();
    return run;
  }

  // Runs the script through the services and in process at `temperature`:
  // the same rounds and tokens, and no fallback.
  Outcome RemoteMatchingLocal(float temperature) {
    EXPECT_TRUE(cluster_->ready) << cluster_->Logs();
    const SessionSpec spec = Spec(temperature);
    Outcome remote = Remote(spec);
    const Outcome local = Local(spec);
    EXPECT_EQ(remote.fallbacks, 0);
    EXPECT_EQ(remote.rounds, local.rounds);
    EXPECT_EQ(remote.tokens, local.tokens);
    return remote;
  }

  static e2e::Cluster* cluster_;
  static std::vector<std::unique_ptr<Model>> models_;
  static std::vector<std::unique_ptr<Backend>> backends_;
  static std::vector<TokenId> prompt_;
  static TokenId eos_;
};

e2e::Cluster* RoundLoopTest::cluster_ = nullptr;
std::vector<std::unique_ptr<Model>> RoundLoopTest::models_;
std::vector<std::unique_ptr<Backend>> RoundLoopTest::backends_;
std::vector<TokenId> RoundLoopTest::prompt_;
TokenId RoundLoopTest::eos_ = 0;

TEST_F(RoundLoopTest, GreedyRoundsWithPlainRoundsBetweenMatchInProcessAndPlainDecoding) {
  const Outcome remote = RemoteMatchingLocal(0.0f);
  EXPECT_EQ(remote.tokens, e2e::PlainGreedy(testing::BundledModel("code-target-7m.gguf"), prompt_,
                                            static_cast<int>(remote.tokens.size()), eos_));
  // The script ran: plain rounds, and speculative rounds that accepted tokens
  // (a draft that lost track of the sequence during plain rounds would not).
  int plain = 0, drafted = 0, accepted = 0;
  for (auto [d, a] : remote.rounds) {
    plain += d == 0;
    drafted += d;
    accepted += a;
  }
  EXPECT_GE(plain, 6);
  EXPECT_GT(drafted, 10);
  EXPECT_GT(accepted, drafted / 3);
}

TEST_F(RoundLoopTest, SampledRoundsWithPlainRoundsBetweenMatchInProcess) {
  EXPECT_GE(RemoteMatchingLocal(1.0f).tokens.size(), 8u);
}

}  // namespace
}  // namespace specserve
