#include "spec/logit_rules.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

absl::Status CheckIds(const std::vector<TokenId>& ids, const char* field, int32_t vocab) {
  for (TokenId t : ids) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": token id ", t, " not in [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPenalty(float v, const char* field) {
  if (!(v >= -kMaxPenalty && v <= kMaxPenalty)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", v, " not in [-2, 2]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLogitRules(const LogitRules& r, int32_t vocab) {
  absl::flat_hash_set<TokenId> seen;
  for (const auto& [id, bias] : r.logit_bias) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", id, " not in [0, ", vocab, ")"));
    }
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: bias ", bias, " of token ", id, " not in [-100, 100]"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", id, " given twice"));
    }
  }
  RETURN_IF_ERROR(CheckPenalty(r.presence_penalty, "presence_penalty"));
  RETURN_IF_ERROR(CheckPenalty(r.frequency_penalty, "frequency_penalty"));
  if (r.min_tokens < 0) return absl::InvalidArgumentError(absl::StrCat("min_tokens ", r.min_tokens, " must be >= 0"));
  RETURN_IF_ERROR(CheckIds(r.eos_ids, "eos_ids", vocab));
  RETURN_IF_ERROR(CheckIds(r.stop_ids, "stop_ids", vocab));
  if (!r.grammar.empty() && r.filter == nullptr) {
    return absl::InvalidArgumentError("grammar: given but not compiled into a token filter here");
  }
  return absl::OkStatus();
}

LogitState::LogitState(const LogitRules* rules) : rules_(rules) {
  if (rules_ != nullptr && rules_->filter != nullptr) filter_ = rules_->filter->Clone();
}

LogitState& LogitState::operator=(const LogitState& other) {
  if (this == &other) return *this;
  rules_ = other.rules_;
  generated_ = other.generated_;
  counts_ = other.counts_;
  filter_ = other.filter_ != nullptr ? other.filter_->Clone() : nullptr;
  return *this;
}

void LogitState::Apply(float* logits, int32_t vocab) {
  if (rules_ == nullptr) return;
  const LogitRules& r = *rules_;
  if (filter_ != nullptr) filter_->Mask(logits, vocab);
  for (const auto& [id, bias] : r.logit_bias) {
    if (id >= 0 && id < vocab) logits[id] += bias;
  }
  for (const auto& [id, n] : counts_) {
    if (id >= 0 && id < vocab) logits[id] -= r.frequency_penalty * static_cast<float>(n) + r.presence_penalty;
  }
  const auto forbid = [&](const std::vector<TokenId>& ids) {
    for (TokenId t : ids) {
      if (t >= 0 && t < vocab) logits[t] = -INFINITY;
    }
  };
  if (generated_ < r.min_tokens) {
    forbid(r.eos_ids);
    forbid(r.stop_ids);
  }
  if (r.ignore_eos) forbid(r.eos_ids);
}

absl::Status LogitState::Advance(TokenId token) {
  if (rules_ == nullptr) return absl::OkStatus();
  if (filter_ != nullptr) RETURN_IF_ERROR(filter_->Advance(token));
  if (rules_->presence_penalty != 0.0f || rules_->frequency_penalty != 0.0f) ++counts_[token];
  ++generated_;
  return absl::OkStatus();
}

int32_t LogitState::count(TokenId token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

void ApplyToBlock(const LogitState& committed, const TokenId* drafts, int32_t k, int32_t vocab, float* rows) {
  LogitState fork = committed;
  for (int32_t i = 0; i <= k; ++i) {
    fork.Apply(rows + static_cast<int64_t>(i) * vocab, vocab);
    if (i < k && !fork.Advance(drafts[i]).ok()) return;
  }
}

}  // namespace specserve
