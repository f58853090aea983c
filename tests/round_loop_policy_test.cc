// What a request's loop posts to seed later requests (LoopOptions::on_policy,
// coordinator/target_load_board.h): the policy of its own drafter only. A
// model drafter that fails mid-way is replaced by the n-gram drafter, whose
// rounds then teach the same KPolicy; that blend is neither drafter's, so
// from the fallback on nothing is posted (a new model-drafter request seeded
// with it would take the n-gram's acceptance and free draft as the model's).
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/drafters.h"
#include "coordinator/local_engines.h"
#include "coordinator/round_loop.h"
#include "tests/test_models.h"

namespace specserve {
namespace {

// The real model drafter, failing from its `fail_at`-th proposal on (the
// draft service gone mid-request).
class FailsAfter final : public Drafter {
 public:
  FailsAfter(Backend& backend, int fail_at) : inner_(backend), fail_at_(fail_at) {}
  absl::Status Open(const SessionSpec& spec) override { return inner_.Open(spec); }
  absl::Status Commit(const Verdict& v) override { return inner_.Commit(v); }
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override {
    if (++proposals_ >= fail_at_) return absl::UnavailableError("draft service gone");
    return inner_.Propose(round, k);
  }
  void Close() override { inner_.Close(); }
  absl::string_view name() const override { return kModelDrafterName; }

 private:
  LocalDrafter inner_;
  int fail_at_;
  int proposals_ = 0;
};

TEST(RoundLoopPolicy, AFallenBackRequestPostsNoMorePolicies) {
  testing::LoadedModel target = testing::LoadModel(testing::ModelPath("code-target-7m"));
  testing::LoadedModel draft = testing::LoadModel(testing::ModelPath("code-draft-1m"));
  ASSERT_TRUE(target.backend && draft.backend);
  SessionSpec spec;
  // A prompt that repeats itself, so that the n-gram drafter drafts too.
  spec.prompt = {1, 100, 200, 300, 400, 100, 200, 300, 400, 100, 200, 300, 400, 100, 200};
  spec.max_new_tokens = 40;
  FailsAfter drafter(*draft.backend, /*fail_at=*/4);
  LocalVerifier verifier(*target.backend);
  LoopOptions opts;
  opts.k = KPolicy::Adaptive(4);
  int fallbacks = 0, posted_before = 0, posted_after = 0, drafted_after = 0;
  opts.make_fallback = [&](const absl::Status&, bool) {
    ++fallbacks;
    return MakeFallbackDrafter();
  };
  opts.on_policy = [&](const KPolicy&) { ++(fallbacks == 0 ? posted_before : posted_after); };
  opts.on_round = [&](const RoundRecord& r) {
    if (fallbacks > 0) drafted_after += r.drafted;
  };
  absl::StatusOr<LoopStats> st = RunSpeculative(spec, &drafter, verifier, opts);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->fallbacks, 1);
  EXPECT_EQ(posted_before, 3);  // the model drafter's three rounds
  ASSERT_GT(drafted_after, 0) << "the n-gram drafter never drafted: the test shows nothing";
  EXPECT_EQ(posted_after, 0);
}

}  // namespace
}  // namespace specserve
