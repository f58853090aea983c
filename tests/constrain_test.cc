// The grammar library (constrain/): schema compile errors and limits, the
// byte matcher on valid and invalid documents per feature, token masks
// against the brute-force mask, and masked random walks over the bundled
// tokenizer whose every output python3-jsonschema validates
// (tests/constrain_validate.py over tests/data/schemas/*.json).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "common/gguf.h"
#include "common/tokenizer.h"
#include "constrain/grammar_filter.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/token_mask.h"
#include "nlohmann/json.hpp"
#include "tests/schema_validator.h"
#include "tests/test_paths.h"

namespace specserve::constrain {
namespace {

using json = nlohmann::ordered_json;
using specserve::testing::BundledModel;
using specserve::testing::ReadAll;
using specserve::testing::SourceDir;

std::shared_ptr<const Grammar> MustCompile(const json& schema) {
  auto g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << g.status() << " for " << schema.dump();
  return g.ok() ? *g : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& doc) {
  GrammarMatcher m(g);
  return m.AcceptBytes(doc) && m.IsComplete();
}

TEST(ConstrainCompileTest, UnsupportedKeywordsNameKeywordAndPointer) {
  struct Case {
    json schema;
    std::string want;
  } cases[] = {
      {{{"type", "object"}, {"properties", {{"a", {{"oneOf", json::array({{{"type", "string"}}})}}}}}},
       "#/properties/a': unsupported keyword \"oneOf\""},
      {{{"type", "object"}, {"patternProperties", json::object()}}, "unsupported keyword \"patternProperties\""},
      {{{"$ref", "#/$defs/missing"}}, "names nothing"},
      {{{"$ref", "http://example.com/s.json"}}, "only local references"},
      {{{"type", "string"}, {"pattern", "(a)\\1"}}, "backreferences"},
      {{{"type", "string"}, {"pattern", "a(?=b)"}}, "lookaround"},
      {{{"type", "string"}, {"pattern", "\\bword"}}, "word boundaries"},
      {{{"type", "string"}, {"minLength", 5}, {"maxLength", 2}}, "below \"minLength\""},
      {{{"type", "integer"}, {"minimum", 5}, {"maximum", 2}}, "no integer"},
      {{{"type", "string"}, {"format", "hostname"}}, "unsupported format \"hostname\""},
      {{{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}, {"required", {"b"}}}, "\"b\" is not in"},
      {{{"type", "tuple"}}, "unknown type"},
      {{{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}, "additionalProperties"},
      {{{"$ref", "#"}}, "admits no document"},
  };
  for (const Case& c : cases) {
    auto g = CompileJsonSchema(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema.dump();
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
    EXPECT_NE(g.status().message().find(c.want), std::string::npos) << g.status() << " wanted " << c.want;
  }
}

TEST(ConstrainCompileTest, ExplodingSchemasAreRefusedFast) {
  // Many long strings, many properties, deep nesting, a huge string length
  // and a pattern repeat that multiplies.
  json deep = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 40; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"maxLength", 20000}};
  json refs = {{"$defs", json::object()}, {"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 5000; ++i) refs["properties"]["p" + std::to_string(i)] = {{"type", "integer"}, {"minimum", i}};
  const json schemas[] = {wide, refs, deep, {{"type", "string"}, {"maxLength", 100000000}},
                          {{"type", "string"}, {"pattern", "^((a{1000}){1000}){1000}$"}}};
  for (const json& s : schemas) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = CompileJsonSchema(s);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted) << g.status();
    EXPECT_LT(secs, 2.0) << g.status();
    std::printf("refused in %.3f s: %s\n", secs, std::string(g.status().message()).c_str());
  }
}

struct MatchCase {
  json schema;
  std::vector<std::string> good, bad;
};

TEST(ConstrainMatcherTest, AcceptsValidAndRejectsInvalidPerFeature) {
  const json person = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}},
                                       {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                       {"required", {"name"}},
                       {"additionalProperties", false}};
  const MatchCase cases[] = {
      {person,
       {R"({"name":"Ann"})", R"({"name":"Ann","age":3})", R"({ "name": "A\"b", "tags": ["x", "y"] })",
        "{\n  \"name\": \"A\",\n  \"age\": -12\n}", R"({"name":"é😀","age":0,"tags":[]})"},
       {R"({})", R"({"age":3})", R"({"age":3,"name":"Ann"})", R"({"name":"Ann","extra":1})", R"({"name":"Ann",})",
        R"({"name":Ann})", R"({"name":"Ann","age":03})", "{   \"name\":\"A\"}", "{\"name\":\"\x01\"}"}},
      {{{"type", "string"}, {"enum", {"red", "green"}}}, {R"("red")", R"("green")"}, {R"("blue")", R"("re")"}},
      {{{"const", {{"a", 1}}}}, {R"({"a":1})"}, {R"({"a":2})"}},
      {{{"type", {"string", "null"}}}, {R"("x")", "null"}, {"1", "nul"}},
      {{{"type", "boolean"}}, {"true", "false"}, {"True", "1"}},
      {{{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 2}, {"maxItems", 3}},
       {"[1,2]", "[1, 2, 3]"}, {"[1]", "[1,2,3,4]", "[]"}},
      {{{"type", "integer"}, {"minimum", -15}, {"maximum", 230}},
       {"-15", "-9", "0", "7", "99", "230", "199"}, {"-16", "231", "300", "-0", "1.5", "1e2"}},
      {{{"type", "integer"}, {"exclusiveMinimum", 0}, {"exclusiveMaximum", 10}}, {"1", "9"}, {"0", "10"}},
      {{{"type", "number"}, {"minimum", 0}, {"maximum", 1}}, {"0", "1", "0.25"}, {"1.5", "-0.1", "2"}},
      {{{"type", "number"}}, {"0", "-1.5", "3e10", "2.5E-3"}, {"01", "1.", ".5", "--1"}},
      {{{"type", "string"}, {"minLength", 2}, {"maxLength", 3}}, {R"("ab")", R"("a\nb")", R"("é😀")"},
       {R"("a")", R"("abcd")"}},
      {{{"type", "string"}, {"pattern", "^[A-Z]{2}-\\d{3}$"}}, {R"("AB-123")"}, {R"("Ab-123")", R"("AB-12")"}},
      {{{"type", "string"}, {"pattern", "cat|dog"}}, {R"("cat")", R"("hotdog!")"}, {R"("cow")"}},
      {{{"type", "string"}, {"format", "date"}}, {R"("2024-02-28")", R"("1999-12-31")", R"("0001-01-01")"},
       {R"("2024-02-30")", R"("2024-13-01")", R"("24-01-01")", R"("0000-01-03")"}},
      {{{"type", "string"}, {"format", "uuid"}}, {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {{{"type", "string"}, {"format", "date-time"}}, {R"("2024-01-05T10:20:30Z")", R"("2024-01-05T10:20:30.5+02:00")"},
       {R"("2024-01-05 10:20:30")", R"("0000-01-05T08:00:00+09:00")"}},
      {{{"anyOf", {{{"type", "integer"}}, {{"type", "object"}, {"properties", {{"a", {{"type", "null"}}}}}}}}},
       {"5", R"({"a":null})", "{}"}, {R"({"a":1})", "\"5\""}},
      {json::parse(R"({"$defs": {"node": {"type": "object", "required": ["v", "next"],
          "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
          "$ref": "#/$defs/node"})"),
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
  };
  for (const MatchCase& c : cases) {
    auto g = MustCompile(c.schema);
    ASSERT_NE(g, nullptr);
    for (const std::string& d : c.good) EXPECT_TRUE(Matches(g, d)) << c.schema.dump() << " should accept " << d;
    for (const std::string& d : c.bad) EXPECT_FALSE(Matches(g, d)) << c.schema.dump() << " should reject " << d;
  }
}

TEST(ConstrainMatcherTest, JsonObjectModeAndWhitespaceBound) {
  auto g = CompileAnyJsonObject();
  ASSERT_TRUE(g.ok()) << g.status();
  for (const char* d : {"{}", R"({"a":[1,{"b":null},"x"],"c":{"d":true}})", "{ \"a\" : -1.5e3 }"})
    EXPECT_TRUE(Matches(*g, d)) << d;
  for (const char* d : {"[]", "\"x\"", "{\"a\"}", "{\"a\":1,}", "{  }"}) EXPECT_FALSE(Matches(*g, d)) << d;
  // A newline and at most 16 spaces between tokens; never more.
  EXPECT_TRUE(Matches(*g, "{\n" + std::string(16, ' ') + "}"));
  EXPECT_FALSE(Matches(*g, "{\n" + std::string(17, ' ') + "}"));
  // A rejected byte leaves the state as it was.
  GrammarMatcher m(*g);
  ASSERT_TRUE(m.AcceptBytes("{\"a\":"));
  const auto key = m.StateKey();
  EXPECT_FALSE(m.AcceptByte('}'));
  EXPECT_EQ(m.StateKey(), key);
  EXPECT_FALSE(m.IsComplete());
}

// --- with the bundled tokenizer ---

struct Bundled {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenVocabulary> vocab;
};
Bundled* LoadModel(const std::string& file) {
  auto* out = new Bundled;
  auto f = GgufFile::Open(BundledModel(file));
  if (!f.ok()) return out;
  auto tok = Tokenizer::FromGguf(**f);
  if (!tok.ok()) return out;
  out->tok = std::move(*tok);
  out->vocab = TokenVocabulary::FromTokenizer(*out->tok);
  return out;
}
const Bundled* LoadBundled() {
  static const Bundled* b = LoadModel("code-target-7m.gguf");
  return b;
}

TokenMask BruteForceMask(const GrammarMatcher& m, const TokenVocabulary& v) {
  TokenMask mask((v.vocab_size() + 63) / 64, 0);
  for (int32_t t = 0; t < v.vocab_size(); ++t) {
    GrammarMatcher c = m;
    if (!v.bytes(t).empty() && c.AcceptBytes(v.bytes(t))) mask[t / 64] |= uint64_t{1} << (t % 64);
  }
  return mask;
}

std::vector<int32_t> Allowed(const TokenMask& mask, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < n; ++t)
    if ((mask[t / 64] >> (t % 64)) & 1) out.push_back(t);
  return out;
}

// A masked random walk: a uniformly drawn allowed token each step, eos as
// soon as it is allowed. Returns the text, or "" past max_tokens. Checks the
// mask against the brute force every `brute_every` steps (0: never).
std::string RandomWalk(const std::shared_ptr<const Grammar>& g, const Bundled& b,
                       const std::shared_ptr<MaskCache>& cache, uint32_t seed, int max_tokens, int brute_every,
                       int* brute_checks) {
  const int32_t eos = b.tok->eos();
  auto filter = MakeGrammarFilter(g, b.vocab, {eos}, cache);
  auto* gf = static_cast<GrammarTokenFilter*>(filter.get());
  std::mt19937 rng(seed);
  std::string text;
  const int32_t n = b.vocab->vocab_size();
  std::vector<float> logits(n);
  for (int step = 0; step < max_tokens; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    filter->Mask(logits.data(), n);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < n; ++t)
      if (logits[t] == 0.0f) allowed.push_back(t);
    if (brute_every > 0 && step % brute_every == 0) {
      TokenMask brute = BruteForceMask(gf->matcher().matcher(), *b.vocab);
      if (gf->matcher().IsComplete()) brute[eos / 64] |= uint64_t{1} << (eos % 64);
      EXPECT_EQ(Allowed(brute, n), allowed) << "mask differs from the brute force after: " << text;
      ++*brute_checks;
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after: " << text;
      return "";
    }
    int32_t pick;
    if (std::find(allowed.begin(), allowed.end(), eos) != allowed.end()) {
      pick = eos;
    } else {
      pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    }
    // Clone-then-advance, as a drafter forks the committed filter.
    auto fork = filter->Clone();
    const absl::Status st = fork->Advance(pick);
    if (!st.ok()) {
      ADD_FAILURE() << st;
      return "";
    }
    filter = std::move(fork);
    gf = static_cast<GrammarTokenFilter*>(filter.get());
    if (pick == eos) return text;
    text += b.vocab->bytes(pick);
  }
  return "";
}

TEST(ConstrainTokenTest, RandomWalksOverSchemaSetValidate) {
  const Bundled* b = LoadBundled();
  if (b->tok == nullptr) SPECSERVE_MISSING_INPUT(BundledModel("code-target-7m.gguf"));
  const std::vector<std::filesystem::path> files = testing::SchemaSet();
  ASSERT_GE(files.size(), 50u);
  json requests = json::array();
  std::vector<std::string> names;
  int brute_checks = 0, walks = 0, unfinished = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const json schema = json::parse(ReadAll(files[i]));
    auto g = MustCompile(schema);
    ASSERT_NE(g, nullptr) << files[i];
    auto cache = std::make_shared<MaskCache>();
    for (uint32_t seed = 0; seed < 3; ++seed) {
      ++walks;
      const std::string doc = RandomWalk(g, *b, cache, 1000 * i + seed, 1500, seed == 0 && i % 5 == 0 ? 40 : 0,
                                         &brute_checks);
      if (::testing::Test::HasFailure()) return;
      if (doc.empty()) {
        ++unfinished;
        continue;
      }
      EXPECT_TRUE(Matches(g, doc)) << files[i] << ": " << doc;
      requests.push_back({{"schema", schema}, {"doc", doc}});
      names.push_back(files[i].filename().string());
    }
  }
  EXPECT_LE(unfinished * 10, walks) << unfinished << " of " << walks << " walks ran past 1500 tokens";
  EXPECT_GE(brute_checks, 10);
  bool missing = false;
  std::string err;
  const std::vector<std::string> results = testing::ValidateWithJsonSchema(requests.dump(), &missing, &err);
  if (missing) SPECSERVE_MISSING_INPUT("python3-jsonschema (" + err + ")");
  ASSERT_EQ(results.size(), requests.size()) << err;
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i], "") << names[i] << ": " << requests[i]["doc"].get<std::string>();
}

TEST(ConstrainTokenTest, ForbiddenTokensAreRefusedAndEosOnlyWhenComplete) {
  const Bundled* b = LoadBundled();
  if (b->tok == nullptr) SPECSERVE_MISSING_INPUT(BundledModel("code-target-7m.gguf"));
  auto g = MustCompile({{"type", "array"}, {"items", {{"type", "boolean"}}}, {"maxItems", 1}});
  const int32_t eos = b->tok->eos();
  TokenMatcher m(g, b->vocab, {eos}, std::make_shared<MaskCache>());
  EXPECT_FALSE(m.IsAllowed(eos));
  EXPECT_EQ(m.Accept(eos).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> ids = b->tok->Encode("[true]", false);
  int32_t bad = -1;
  for (int32_t t = 0; t < b->vocab->vocab_size() && bad < 0; ++t)
    if (b->vocab->bytes(t) == "x") bad = t;
  ASSERT_GE(bad, 0);
  const auto before = m.matcher().StateKey();
  EXPECT_EQ(m.Accept(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.matcher().StateKey(), before);
  for (const int32_t t : ids) {
    if (b->vocab->bytes(t).empty()) continue;
    ASSERT_TRUE(m.IsAllowed(t)) << "'" << b->vocab->bytes(t) << "'";
    ASSERT_TRUE(m.Accept(t).ok());
  }
  ASSERT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.IsAllowed(eos));
  EXPECT_TRUE(m.Accept(eos).ok());
  EXPECT_FALSE(m.Accept(bad).ok());
}

TEST(ConstrainTokenTest, SharedCacheFromManyThreadsGivesTheSameMasks) {
  const Bundled* b = LoadBundled();
  if (b->tok == nullptr) SPECSERVE_MISSING_INPUT(BundledModel("code-target-7m.gguf"));
  auto g = CompileAnyJsonObject();
  ASSERT_TRUE(g.ok());
  auto cache = std::make_shared<MaskCache>(64);
  const std::string doc = R"({"key": [1, 2.5, {"x": "hello world"}], "b": null})";
  std::vector<std::vector<TokenMask>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      TokenMatcher m(*g, b->vocab, {b->tok->eos()}, cache);
      for (const int32_t t : b->tok->Encode(doc, false)) {
        got[k].push_back(*m.Mask());
        if (!m.Accept(t).ok()) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  TokenMatcher ref(*g, b->vocab, {b->tok->eos()}, nullptr);
  std::vector<TokenMask> want;
  for (const int32_t t : b->tok->Encode(doc, false)) {
    want.push_back(*ref.Mask());
    ASSERT_TRUE(ref.Accept(t).ok()) << t;
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got[k], want) << "thread " << k;
  EXPECT_LE(cache->size(), 64u);
}

// Mask cost per position on the bundled vocabularies (median microseconds),
// uncached (a fresh trie walk) and cached; run with
// --gtest_also_run_disabled_tests --gtest_filter='*MaskCost*'.
class ConstrainMaskCostTest : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Bundled, ConstrainMaskCostTest, ::testing::Values("code-target-7m.gguf", "code-bpe-4m.gguf"));
TEST_P(ConstrainMaskCostTest, DISABLED_MaskCost) {
  const std::unique_ptr<Bundled> b(LoadModel(GetParam()));
  if (b->tok == nullptr) SPECSERVE_MISSING_INPUT(BundledModel(GetParam()));
  const json schema = json::parse(ReadAll(SourceDir() + "/tests/data/schemas/order_nested.json"));
  auto g = MustCompile(schema);
  ASSERT_NE(g, nullptr);
  std::vector<double> uncached, cached, brute;
  auto cache = std::make_shared<MaskCache>();
  for (uint32_t seed = 0; seed < 5; ++seed) {
    TokenMatcher m(g, b->vocab, {b->tok->eos()}, cache);
    std::mt19937 rng(seed);
    for (int step = 0; step < 300 && !m.finished(); ++step) {
      auto t0 = std::chrono::steady_clock::now();
      const TokenMask fresh = ComputeMask(m.matcher(), *b->vocab);
      auto t1 = std::chrono::steady_clock::now();
      const auto mask = m.Mask();  // computes or finds it
      t1 = std::chrono::steady_clock::now();
      m.Mask();  // found in the cache
      auto t2 = std::chrono::steady_clock::now();
      uncached.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      cached.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      if (step % 25 == 0) {
        auto t3 = std::chrono::steady_clock::now();
        BruteForceMask(m.matcher(), *b->vocab);
        brute.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t3).count());
      }
      std::vector<int32_t> allowed = Allowed(*mask, b->vocab->vocab_size());
      ASSERT_FALSE(allowed.empty());
      const int32_t pick = m.IsAllowed(b->tok->eos()) ? b->tok->eos()
                                                       : allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(m.Accept(pick).ok());
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("%s: vocab %d, trie nodes %zu, positions %zu: mask median uncached %.1f us, cached %.2f us "
              "(second lookup of the same state), brute force %.0f us\n",
              GetParam(), b->vocab->vocab_size(), b->vocab->trie().size(), uncached.size(), median(uncached), median(cached),
              median(brute));
}

}  // namespace
}  // namespace specserve::constrain
