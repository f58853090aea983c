// What the tests of the backend's steps after a forward pass share
// (tests/forward_verify_test.cc: Backend::ForwardVerify;
// tests/forward_sample_test.cc: Backend::ForwardSample). Each builds a batch
// of sequences (a Seq with `kv`, `feed` and `n_logits`), computes the
// reference with Forward and the host step, rolls the caches back, runs the
// backend's step and checks its output against the reference.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/backend.h"

namespace specserve::testing {

template <class Seq>
std::vector<ForwardSeq> Passes(const std::vector<std::unique_ptr<Seq>>& seqs) {
  std::vector<ForwardSeq> passes;
  for (const auto& s : seqs) passes.push_back(ForwardSeq{&s->kv, s->feed, s->n_logits});
  return passes;
}

template <class Seq>
std::vector<int32_t> Lengths(const std::vector<std::unique_ptr<Seq>>& seqs) {
  std::vector<int32_t> lengths;
  for (const auto& s : seqs) lengths.push_back(s->kv.length);
  return lengths;
}

template <class Seq>
void Rollback(Backend& b, const std::vector<std::unique_ptr<Seq>>& seqs, const std::vector<int32_t>& lengths) {
  for (size_t i = 0; i < seqs.size(); ++i) b.kv_pool().Truncate(seqs[i]->kv, lengths[i]);
}

// The reference: the batch's Forward; `host(i, rows)` gives sequence i's
// result where has_step(i) (rows: its logits rows [n_logits, vocab]),
// otherwise its rows are kept in (*want_rows)[i]. The caches then roll back.
template <class Result, class Seq, class HasStep, class Host>
void ForwardThenHost(Backend& b, const std::vector<std::unique_ptr<Seq>>& seqs, HasStep has_step, Host host,
                     std::vector<Result>* want, std::vector<std::vector<float>>* want_rows) {
  const int32_t V = b.config().vocab;
  const std::vector<int32_t> lengths = Lengths(seqs);
  std::vector<float> logits;
  ASSERT_TRUE(b.Forward(Passes(seqs), &logits).ok());
  want->assign(seqs.size(), Result{});
  want_rows->assign(seqs.size(), {});
  int64_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const float* rows = logits.data() + row * V;
    if (has_step(i)) {
      (*want)[i] = host(i, rows);
    } else {
      (*want_rows)[i].assign(rows, rows + static_cast<size_t>(seqs[i]->n_logits) * V);
    }
    row += seqs[i]->n_logits;
  }
  Rollback(b, seqs, lengths);
}

// The backend step's output against the reference: every cache advanced by
// its feed from `lengths`; check(i) for the sequences with a step; the rows
// of the others (`logits` from `first_row[i]`) bit for bit. Then every cache
// is released and the pool must be empty.
template <class Seq, class HasStep, class Check>
void ExpectStepOutput(Backend& b, const std::vector<std::unique_ptr<Seq>>& seqs, const std::vector<int32_t>& lengths,
                      HasStep has_step, const std::vector<float>& logits, const std::vector<int64_t>& first_row,
                      const std::vector<std::vector<float>>& want_rows, Check check) {
  const int32_t V = b.config().vocab;
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(seqs[i]->kv.length, lengths[i] + static_cast<int32_t>(seqs[i]->feed.size()));
    if (has_step(i)) {
      check(i);
    } else {
      ASSERT_GE(logits.size(), static_cast<size_t>(first_row[i] * V) + want_rows[i].size());
      EXPECT_EQ(std::memcmp(logits.data() + first_row[i] * V, want_rows[i].data(), want_rows[i].size() * sizeof(float)),
                0)
          << "sequence " << i << "'s rows";
    }
  }
  for (auto& s : seqs) b.kv_pool().Release(s->kv);
  EXPECT_EQ(b.kv_pool().used_blocks(), 0);
}

}  // namespace specserve::testing
