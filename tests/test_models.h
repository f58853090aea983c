// Loading the models and golden files the tests check, and the checks the
// golden tests share (top-5 logits, greedy continuations).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/weights.h"

namespace specserve::testing {

// The JSON file at PATH; a null json when PATH is "" (an absent SharedPath).
nlohmann::json LoadJson(const std::string& path);

// models/NAME.gguf in the repository, else ../shared/models/NAME.gguf; ""
// when neither exists.
std::string ModelPath(const std::string& name);

// A model and the backend running it.
struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
};

// PATH on the backend OPTS.kind names. Each failure is a non-fatal gtest
// failure and leaves that member and the ones after it null.
LoadedModel LoadModel(const std::string& path, const BackendOptions& opts = {});

// Index of the largest of ROW[0..N).
int32_t ArgmaxRow(const float* row, int32_t n);

// Worst |logit - want| over the checked entries, absolute and relative to
// max(1, |want|).
struct LogitError {
  float abs = 0;
  float rel = 0;
};

// EXPECT_NEAR(LOGITS[id], want, ABS_TOL + REL_TOL * max(1, |want|)) for each
// [id, want] of TOP5 (a golden file's last_logits_top5); WHAT (with " token
// ID") labels failures.
LogitError ExpectTop5Near(const std::vector<float>& logits, const nlohmann::json& top5, double abs_tol,
                          double rel_tol, const std::string& what);

// N greedy tokens on SEQ: the first is the argmax of LOGITS (the row the last
// Forward of SEQ returned); each is fed back through B, and LOGITS ends as the
// last step's row.
absl::StatusOr<std::vector<TokenId>> GreedyContinuation(Backend& b, KvSeq& seq, std::vector<float>& logits,
                                                        size_t n);

// One golden prompt on a fresh sequence of B: IDS prefilled, the last logits
// against REF["last_logits_top5"] within REL_TOL * max(1, |want|) (and, when
// CHECK_ARGMAX, the argmax equal to its first entry), the greedy continuation
// equal to REF["greedy_32"]; the sequence is released. Fatal failures return
// early (wrap in ASSERT_NO_FATAL_FAILURE). Adds the top-5 error to *WORST.
void ExpectGoldenPrompt(Backend& b, const std::vector<TokenId>& ids, const nlohmann::json& ref, double rel_tol,
                        bool check_argmax, const std::string& what, LogitError* worst = nullptr);

// A model name as a test name: code-target-7m -> code_target_7m.
std::string ModelParamName(const ::testing::TestParamInfo<std::string>& info);

// golden.json's checks of model NAME (models/, else ../shared/models) on the
// backend OPTS describes: every prompt, then no KV blocks left in use. Skips
// when golden.json or the model is absent.
void ExpectMatchesGolden(const std::string& name, const BackendOptions& opts, double rel_tol);

}  // namespace specserve::testing
