// The EAGLE head file (common/eagle_head.h): loading and its refusals, the
// head's CPU forward (backends/cpu_eagle.h), and greedy self-speculation
// against plain greedy decoding on the bundled target.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu_eagle.h"
#include "backends/make_backend.h"
#include "common/eagle_head.h"
#include "common/fp16.h"
#include "common/gguf_writer.h"
#include "common/thread_pool.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using testing::BundledModel;

struct HeadSpec {
  int32_t n_embd = 288, n_ff = 64, n_head = 6, n_head_kv = 2;
  std::string arch = kEagleArch;
  std::string fingerprint;
  int32_t target_vocab = 4096;
  int64_t q_rows = 0;  // 0: n_embd (a wrong value makes a bad shape)
  bool drop_down = false;
};

// A random head of the given shapes, written with the project's GGUF writer.
std::string WriteHead(const HeadSpec& s, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  GgufWriter w;
  const std::string a = s.arch;
  w.SetString("general.architecture", a);
  w.SetU32(a + ".embedding_length", s.n_embd);
  w.SetU32(a + ".feed_forward_length", s.n_ff);
  w.SetU32(a + ".context_length", 1024);
  w.SetU32(a + ".attention.head_count", s.n_head);
  w.SetU32(a + ".attention.head_count_kv", s.n_head_kv);
  w.SetU32(a + ".target.embedding_length", 288);
  w.SetU32(a + ".target.vocab_size", s.target_vocab);
  w.SetString(a + ".target.fingerprint", s.fingerprint);
  const int64_t d = s.n_embd, kvd = d / s.n_head * s.n_head_kv;
  struct T {
    std::string name;
    std::vector<int64_t> ne;
  };
  std::vector<T> ts = {{"fc.weight", {2 * d, d}},
                       {"blk.0.attn_norm.weight", {d}},
                       {"blk.0.attn_q.weight", {d, s.q_rows ? s.q_rows : d}},
                       {"blk.0.attn_k.weight", {d, kvd}},
                       {"blk.0.attn_v.weight", {d, kvd}},
                       {"blk.0.attn_output.weight", {d, d}},
                       {"blk.0.ffn_norm.weight", {d}},
                       {"blk.0.ffn_gate.weight", {d, s.n_ff}},
                       {"blk.0.ffn_up.weight", {d, s.n_ff}}};
  if (!s.drop_down) ts.push_back({"blk.0.ffn_down.weight", {s.n_ff, d}});
  for (const T& t : ts) EXPECT_TRUE(w.AddTensor(t.name, t.ne.size() == 1 ? GgmlType::kF32 : GgmlType::kF16, t.ne).ok());
  EXPECT_TRUE(w.Open(path).ok());
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const T& t : ts) {
    if (t.ne.size() == 1) {
      std::vector<float> ones(t.ne[0], 1.0f);
      EXPECT_TRUE(w.WriteTensor(ones.data(), ones.size() * 4).ok());
    } else {
      std::vector<uint16_t> m(t.ne[0] * t.ne[1]);
      for (auto& x : m) x = F32ToF16(nd(rng) / std::sqrt(static_cast<float>(t.ne[0])));
      EXPECT_TRUE(w.WriteTensor(m.data(), m.size() * 2).ok());
    }
  }
  EXPECT_TRUE(w.Close().ok());
  return path;
}

class EagleHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(BundledModel("code-target-7m.gguf"));
    ASSERT_TRUE(m.ok()) << m.status();
    target_ = std::move(*m);
    spec_.fingerprint = TargetFingerprint(*target_->file);
  }
  std::unique_ptr<Model> target_;
  HeadSpec spec_;
};

TEST_F(EagleHeadTest, FingerprintMatchesTheTrainingScripts) {
  // tools/train_eagle.py computes the same string in numpy.
  EXPECT_EQ(spec_.fingerprint, "token_embd.weight F16 [4096, 288] 3f66cfa7d6dd6452");
}

TEST_F(EagleHeadTest, LoadsAValidHead) {
  auto h = EagleHead::Load(WriteHead(spec_, "valid"), *target_);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)->config.n_ff, 64);
  EXPECT_EQ((*h)->config.head_dim, 48);
}

TEST_F(EagleHeadTest, RefusesBadFiles) {
  HeadSpec s = spec_;
  s.q_rows = 144;
  auto bad_shape = EagleHead::Load(WriteHead(s, "shape"), *target_);
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_shape.status().message().find("blk.0.attn_q.weight has shape [144, 288]"), std::string::npos)
      << bad_shape.status();

  s = spec_;
  s.drop_down = true;
  auto missing = EagleHead::Load(WriteHead(s, "missing"), *target_);
  EXPECT_NE(missing.status().message().find("lacks tensor blk.0.ffn_down.weight"), std::string::npos)
      << missing.status();

  s = spec_;
  s.fingerprint = "token_embd.weight F16 [4096, 288] 0000000000000000";
  auto other = EagleHead::Load(WriteHead(s, "other"), *target_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("trained for the target"), std::string::npos) << other.status();

  s = spec_;
  s.target_vocab = 32000;
  auto vocab = EagleHead::Load(WriteHead(s, "vocab"), *target_);
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kFailedPrecondition) << vocab.status();

  // A model file is not a head.
  auto model = EagleHead::Load(BundledModel("code-target-7m.gguf"), *target_);
  EXPECT_NE(model.status().message().find("general.architecture is 'llama'"), std::string::npos) << model.status();

  // A truncated head.
  const std::string full = WriteHead(spec_, "full");
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = ::testing::TempDir() + "/cut.gguf";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 1000);
  auto truncated = EagleHead::Load(cut, *target_);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument) << truncated.status();

  // Trained for another target: the head's fingerprint is the 7m target's.
  auto draft = Model::Load(BundledModel("code-draft-1m.gguf"));
  ASSERT_TRUE(draft.ok());
  auto wrong = EagleHead::Load(WriteHead(spec_, "for7m"), **draft);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition) << wrong.status();
}

TEST_F(EagleHeadTest, OnePositionAtATimeEqualsOnePass) {
  auto head = EagleHead::Load(WriteHead(spec_, "steps"), *target_);
  ASSERT_TRUE(head.ok()) << head.status();
  ThreadPool pool(1);
  CpuEagleHead run(**head, *target_, pool);
  const int n = 9, d = 288;
  std::vector<TokenId> toks;
  std::vector<float> feats(n * d);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int i = 0; i < n; ++i) toks.push_back(10 + 37 * i);
  for (float& x : feats) x = nd(rng);
  EagleSeq all, steps;
  std::vector<float> h_all, h;
  ASSERT_TRUE(run.Append(all, toks, feats.data(), &h_all).ok());
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(run.Append(steps, {toks[i]}, feats.data() + i * d, &h).ok());
    for (int e = 0; e < d; ++e) ASSERT_NEAR(h[e], h_all[i * d + e], 1e-3) << "position " << i;
  }
  // Rolling back and appending again gives the same outputs.
  run.Truncate(steps, 4);
  ASSERT_TRUE(run.Append(steps, {toks[4]}, feats.data() + 4 * d, &h).ok());
  for (int e = 0; e < d; ++e) ASSERT_NEAR(h[e], h_all[4 * d + e], 1e-3);
}

// The bundled head: greedy self-speculation reproduces plain greedy decoding
// token for token at several K, and the head's drafts are mostly accepted.
TEST_F(EagleHeadTest, GreedySelfSpeculationEqualsPlainDecoding) {
  const std::string path = BundledModel("code-target-7m-eagle.gguf");
  if (!std::ifstream(path).good()) SPECSERVE_MISSING_INPUT(path);
  auto head = EagleHead::Load(path, *target_);
  ASSERT_TRUE(head.ok()) << head.status();
  BackendOptions bo;
  auto backend = MakeCpuBackend(*target_, bo);
  ASSERT_TRUE(backend.ok());
  ThreadPool pool(1);
  CpuEagleHead run(**head, *target_, pool);
  auto tok = Tokenizer::FromGguf(*target_->file);
  ASSERT_TRUE(tok.ok());
  // Code written for this test (not an evaluation prompt).
  const std::vector<std::string> texts = {
      "def read_lines(path):\n    with open(path) as f:\n        return [line.rstrip() for line in f]\n\n\ndef ",
      "import os\nimport sys\n\n\nclass Config:\n    def __init__(self, name, value=None):\n        self."};
  for (const std::string& text : texts) {
    const std::vector<TokenId> prompt = (*tok)->Encode(text, /*add_bos=*/true);
    auto plain = GreedySelfSpeculate(**backend, nullptr, prompt, 64, 0);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(plain->target_passes, 64);
    for (int k : {1, 2, 4}) {
      auto spec = GreedySelfSpeculate(**backend, &run, prompt, 64, k);
      ASSERT_TRUE(spec.ok()) << spec.status();
      EXPECT_EQ(spec->tokens, plain->tokens) << "K " << k;
      EXPECT_GT(spec->accepted, spec->drafted / 3) << "K " << k;
      EXPECT_LT(spec->target_passes, 64) << "K " << k;
    }
  }
}

}  // namespace
}  // namespace specserve
