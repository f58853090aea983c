// Chat templates: the Jinja engine's pieces (values, whitespace control,
// loops and scopes, filters, tests, methods, errors and limits), the chat
// API (GGUF metadata, --chat-template files, the ChatML fallback), and the
// real templates of tests/data/chat_templates rendered on the conversations
// of tests/chat/conversations.json, compared byte for byte with python3-jinja2
// run at test time (tests/chat/render_reference.py, HF's environment).
#include "chat/chat_template.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/jinja_builtins.h"
#include "chat/jinja_template.h"
#include "common/gguf.h"
#include "tests/gguf_writer.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using jinja::Syntax;
using jinja::Template;
using jinja::Value;
using jinja::Vars;

std::string SourceDirFile(const std::string& rel) { return testing::SourceDir() + "/" + rel; }

// Renders SRC with VARS; "ERROR: <message>" when parsing or rendering fails.
std::string R(const std::string& src, const Vars& vars = {}, const Syntax& syntax = {},
              const jinja::RenderLimits& limits = {}) {
  auto t = Template::Parse(src, syntax);
  if (!t.ok()) return "ERROR: " + std::string(t.status().message());
  auto out = t->Render(vars, limits);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}
std::string Hf(const std::string& src, const Vars& vars = {}) { return R(src, vars, jinja::kHfChatSyntax); }

Value List(std::vector<Value> v) { return *Value::List(std::move(v)); }
Value Dict(std::vector<std::pair<std::string, Value>> e) { return *Value::Dict(std::move(e)); }

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& x : j) items.push_back(FromJson(x));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [k, x] : j.items()) entries.emplace_back(k, FromJson(x));
      return Dict(std::move(entries));
    }
    default: return Value();
  }
}

// --- values and expressions ---

TEST(JinjaExprTest, ArithmeticFollowsPython) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 10 }}|{{ 10 / 4 }}|{{ 7 // 2 }}|{{ -7 // 2 }}"),
            "7|9|1024|2.5|3|-4");
  EXPECT_EQ(R("{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1.5e-5 }}|{{ 3.0 }}|{{ 2 * 1.5 }}"),
            "2|-2|0.30000000000000004|1e+16|1.5e-05|3.0|3.0");
  EXPECT_EQ(R("{{ 'ab' * 3 }}|{{ 'a' ~ 1 ~ none ~ true }}|{{ 'x' + 'y' }}|{{ [1] + [2] }}"), "ababab|a1NoneTrue|xy|[1, 2]");
}

TEST(JinjaExprTest, ValuesPrintAsPythonStrAndRepr) {
  EXPECT_EQ(R("{{ [1, 2.5, 'a', none, true, {'k': [1]}] }}"), "[1, 2.5, 'a', None, True, {'k': [1]}]");
  EXPECT_EQ(R("{{ none }}|{{ undefined_name }}|{{ false }}|{{ [\"it's\"] }}"), "None||False|[\"it's\"]");
  EXPECT_EQ(R("{{ 'a\\tb\\n' }}|{{ ['a\\tb'] }}|{{ '\\u00e9\\x41' }}"), "a\tb\n|['a\\tb']|\xC3\xA9" "A");
}

TEST(JinjaExprTest, ComparisonsLogicAndConditionals) {
  EXPECT_EQ(R("{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ [1, 2] == [1, 2] }}"),
            "True|False|True|True|True");
  EXPECT_EQ(R("{{ 'b' in 'abc' }}|{{ 2 not in [1, 3] }}|{{ 'k' in {'k': 1} }}|{{ 'x' in missing }}"),
            "True|True|True|False");
  EXPECT_EQ(R("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ not none }}|{{ 'yes' if 0 else 'no' }}|{{ 'a' if 1 }}"),
            "x|y|True|no|a");
}

TEST(JinjaExprTest, SubscriptsAndSlicesCountCodePoints) {
  Vars v = {{"m", List({Value("a"), Value("b"), Value("c"), Value("d")})}, {"s", Value("h\xC3\xA9llo")}};
  EXPECT_EQ(R("{{ m[1:] }}|{{ m[::-1] }}|{{ m[-1] }}|{{ m[1:3] }}|{{ m[::2] }}|{{ m[10] }}", v),
            "['b', 'c', 'd']|['d', 'c', 'b', 'a']|d|['b', 'c']|['a', 'c']|");
  EXPECT_EQ(R("{{ s[1] }}|{{ s[1:3] }}|{{ s|length }}|{{ s[::-1] }}", v), "\xC3\xA9|\xC3\xA9l|5|oll\xC3\xA9h");
  EXPECT_EQ(R("{{ out[:-1] }}", {{"out", Value("{\"a\": 1}")}}), "{\"a\": 1");
}

TEST(JinjaExprTest, AttributesItemsAndMethods) {
  Vars v = {{"msg", Dict({{"role", Value("user")}, {"content", Value("  Hi there  ")}, {"items", Value(1)}})}};
  EXPECT_EQ(R("{{ msg.role }}|{{ msg['role'] }}|{{ msg.nope }}|{{ msg.content.strip() }}|{{ msg['items'] }}", v),
            "user|user||Hi there|1");
  EXPECT_EQ(R("{{ msg.get('role') }}|{{ msg.get('x') }}|{{ msg.get('x', 'd') }}", v), "user|None|d");
  EXPECT_EQ(R("{% for k, x in msg.items() %}{{ k }}={{ x }};{% endfor %}", v), "role=user;content=  Hi there  ;items=1;");
  EXPECT_EQ(R("{{ 'a b  c'.split() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}"),
            "['a', 'b', 'c']|['a', 'b']|True|True");
  EXPECT_EQ(R("{{ 'hello world'.title() }}|{{ 'ABC'.lower() }}|{{ 'abc'.upper() }}|{{ 'xxhixx'.strip('x') }}"),
            "Hello World|abc|ABC|hi");
}

TEST(JinjaExprTest, UndefinedBehavesAsJinjaDefault) {
  EXPECT_EQ(R("[{{ nope }}]{{ nope|length }}{{ nope is defined }}{% for x in nope %}x{% endfor %}"), "[]0False");
  EXPECT_EQ(R("{{ nope.attr }}"), "ERROR: chat template: line 1, column 8: 'nope' is undefined");
  EXPECT_EQ(R("{{ none.attr }}|{{ [][0] }}"), "|");
  EXPECT_NE(R("{{ nope + 1 }}").find("ERROR"), std::string::npos);
}

// --- whitespace control ---

TEST(JinjaSyntaxTest, DefaultsKeepWhitespace) {
  const std::string src = "  {% if true %}\n  x\n  {% endif %}\n  {{ 1 }}\n{# c #}\ny\n";
  EXPECT_EQ(R(src), "  \n  x\n  \n  1\n\ny");
  EXPECT_EQ(R(src, {}, jinja::kHfChatSyntax), "  x\n  1\ny");
}

TEST(JinjaSyntaxTest, MinusAndPlusModifiers) {
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a \n {{- 1 -}} \n b"), "a1b");
  EXPECT_EQ(Hf("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  EXPECT_EQ(R("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
  EXPECT_EQ(R("x\r\ny\n"), "x\ny");
  EXPECT_EQ(R("x\n\n", {}, Syntax{false, false, true}), "x\n\n");
}

// --- statements ---

TEST(JinjaStmtTest, ForLoopVariables) {
  EXPECT_EQ(R("{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ x }}"
              "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.length }} {% endfor %}"),
            "013aF3 122b3 231cL3 ");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) if x % 2 %}{{ x }}{{ loop.length }},{% endfor %}"), "15,35,55,75,95,");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
              "{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(R("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.cycle('o', 'e') }}{% endfor %}"), "oeo");
}

TEST(JinjaStmtTest, SetScopesAndNamespaces) {
  EXPECT_EQ(R("{% set x = 0 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"), "1110");
  EXPECT_EQ(R("{% set ns = namespace(x=0) %}{% for i in range(3) %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}"),
            "3");
  EXPECT_EQ(R("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(R("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(R("{% set t %}block {{ 1 }}{% endset %}[{{ t }}]"), "[block 1]");
  EXPECT_EQ(R("{% set x = 1 %}{% set x.y = 2 %}").substr(0, 6), "ERROR:");
  EXPECT_EQ(R("{% set ns = namespace() %}{% set ns.inner = namespace() %}").substr(0, 6), "ERROR:");
}

TEST(JinjaStmtTest, MacrosAndFilterBlocks) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('Ann') }} {{ greet('Bo', punct='?') }}"),
            "Hi Ann! Hi Bo?");
  EXPECT_EQ(R("{% filter upper %}shout {{ 'this' }}{% endfilter %}"), "SHOUT THIS");
  EXPECT_EQ(R("{% generation %}kept{% endgeneration %}"), "kept");
}

// --- filters and tests ---

TEST(JinjaFilterTest, StringFilters) {
  EXPECT_EQ(R("{{ '  a b \\n'|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello'|capitalize }}"),
            "a b|a|AB|ab|Hello");
  EXPECT_EQ(R("{{ 'aaa'|replace('a', 'b', 2) }}|{{ 5|string ~ 'x' }}|{{ 'x'|safe }}|{{ '<&>'|e }}"), "bba|5x|x|&lt;&amp;&gt;");
  EXPECT_EQ(R("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  // Python's str.strip also strips Unicode whitespace (U+3000, U+00A0).
  EXPECT_EQ(R("[{{ s|trim }}]", {{"s", Value("\xE3\x80\x80" "x\xC2\xA0")}}), "[x]");
}

TEST(JinjaFilterTest, SequenceFilters) {
  Vars v = {{"ms", FromJson(nlohmann::ordered_json::parse(
                      R"([{"role": "user", "n": 2}, {"role": "assistant", "n": 1}, {"role": "user", "n": 3}])"))}};
  EXPECT_EQ(R("{{ ms|length }}|{{ (ms|first).role }}|{{ (ms|last).n }}|{{ ms|map(attribute='role')|join(',') }}", v),
            "3|user|3|user,assistant,user");
  EXPECT_EQ(R("{{ ms|selectattr('role', 'equalto', 'user')|list|length }}|{{ ms|rejectattr('n', 'gt', 1)|list|length }}",
              v),
            "2|1");
  EXPECT_EQ(R("{{ [3, 1, 2]|sort }}|{{ [1, 2, 2]|unique|list }}|{{ [1, 2]|sum }}|{{ ['b', 'a']|max }}|{{ [1, 2]|reverse|list }}"),
            "[1, 2, 3]|[1, 2]|3|b|[2, 1]");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|items|list }}|{{ nope|default('d') }}|{{ ''|default('d', true) }}|{{ [1,2]|select('odd')|list }}"),
            "[('b', 1), ('a', 2)]|d|d|[1]");
}

TEST(JinjaFilterTest, ToJsonIsHfJsonDumps) {
  Vars v = {{"x", FromJson(nlohmann::ordered_json::parse(R"({"b": [1, 2.5, null, true], "a": "é\"\n", "e": {}})"))}};
  EXPECT_EQ(R("{{ x|tojson }}", v), "{\"b\": [1, 2.5, null, true], \"a\": \"\xC3\xA9\\\"\\n\", \"e\": {}}");
  EXPECT_EQ(R("{{ x|tojson(indent=2, sort_keys=true) }}", v),
            "{\n  \"a\": \"\xC3\xA9\\\"\\n\",\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"e\": {}\n}");
  EXPECT_EQ(R("{{ 'é'|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}"), "\"\\u00e9\"|[1,2]");
  EXPECT_NE(R("{{ nope|tojson }}").find("ERROR"), std::string::npos);
}

TEST(JinjaFilterTest, Tests) {
  EXPECT_EQ(R("{{ x is defined }}{{ y is defined }}{{ none is none }}{{ 's' is string }}{{ {} is mapping }}",
              {{"x", Value(1)}}),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(R("{{ 's' is iterable }}{{ 1 is iterable }}{{ [1] is sequence }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}"
              "{{ 1 is not none }}{{ 2 is eq 2 }}{{ 'a' is in 'abc' }}{{ true is sameas true }}"),
            "TrueFalseTrueTrueTrueTrueTrueTrueTrue");
}

// --- errors and limits ---

TEST(JinjaErrorTest, SyntaxErrorsNameThePosition) {
  EXPECT_EQ(R("{{ 1 + }}"), "ERROR: chat template: line 1, column 8: expected an expression, got '}}'");
  EXPECT_EQ(R("a\n{% if x %}b"), "ERROR: chat template: line 2, column 12: unexpected end of template: missing "
                                 "{% elif %} or {% else %} or {% endif %}");
  EXPECT_EQ(R("{{ x|nosuchfilter }}"), "ERROR: chat template: line 1, column 6: no filter named 'nosuchfilter'");
  EXPECT_EQ(R("{{ x is nosuchtest }}"), "ERROR: chat template: line 1, column 9: no test named 'nosuchtest'");
  EXPECT_EQ(R("{% include 'x' %}"), "ERROR: chat template: line 1, column 4: unknown or unsupported tag 'include'");
  EXPECT_EQ(R("{{ 'abc }}"), "ERROR: chat template: line 1, column 4: unterminated string literal");
  EXPECT_EQ(R("{{ x"), "ERROR: chat template: line 1, column 1: unclosed variable tag ({{ without }})");
  EXPECT_EQ(R("{# x"), "ERROR: chat template: line 1, column 1: unclosed comment ({# without #})");
  EXPECT_EQ(R("{% break %}"), "ERROR: chat template: line 1, column 4: 'break' outside a for loop");
  EXPECT_EQ(R("{{ ) }}"), "ERROR: chat template: line 1, column 4: unexpected ')'");
}

TEST(JinjaErrorTest, RaiseExceptionSurfacesTheMessage) {
  auto t = Template::Parse("{{ raise_exception('Roles must alternate') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->Render({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), std::string(jinja::kRaisedPrefix) + "Roles must alternate");
}

TEST(JinjaErrorTest, HostileTemplatesHitLimitsNotTheStack) {
  jinja::RenderLimits small;
  small.max_output_bytes = 1 << 16;
  small.max_steps = 100000;
  EXPECT_NE(R("{{ 'x' * 1000000000 }}", {}, {}, small).find("ERROR"), std::string::npos);
  EXPECT_NE(R("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}, {}, small)
                .find("steps"),
            std::string::npos);
  EXPECT_NE(R("{% for i in range(1000000) %}{% endfor %}").find("sandbox"), std::string::npos);
  EXPECT_NE(R("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", {}, {}, small)
                .find("ERROR"),
            std::string::npos);
  EXPECT_NE(R("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nest deeper"), std::string::npos);
  EXPECT_NE(R("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nesting deeper"),
            std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_NE(R(chain + " }}").find("nests deeper"), std::string::npos);
  std::string nots = "{{ " ;
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_NE(R(nots + "1 }}").find("ERROR"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  EXPECT_NE(R(ifs).find("nesting deeper"), std::string::npos);
  EXPECT_NE(R("{% set ns = namespace(a=[]) %}{% for i in range(100) %}{% set ns.a = [ns.a] %}{% endfor %}").find("ERROR"), std::string::npos);
  // Work inside builtins counts: `in` over a long list, string indexing.
  EXPECT_NE(R("{% set l = range(100000)|list %}{% for i in range(100000) %}{{ i in l }}{% endfor %}").find("steps"),
            std::string::npos);
  EXPECT_NE(R("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s[i] }}{% endfor %}").find("steps"),
            std::string::npos);
  std::string dict = "{% set d = {";
  for (int i = 0; i < 50000; ++i) dict += "'k" + std::to_string(i) + "': " + std::to_string(i) + ",";
  EXPECT_EQ(R(dict + "} %}{{ d|length }} {{ d['k49999'] }} {{ d.k7 }}"), "50000 49999 7");
  EXPECT_NE(R("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(R("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_NE(R("{{ 1 // 0 }}").find("zero"), std::string::npos);
}

// --- the chat API ---

TEST(ChatTemplateTest, ChatMlFallback) {
  auto out = RenderChat(ChatMlTemplate(), {{"system", "S"}, {"user", "U"}}, true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  out = RenderChat(ChatMlTemplate(), {{"user", "U"}}, false);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplateTest, RaisedErrorsAreInvalidArgument) {
  ChatTemplate t{"{{ raise_exception('no ' + messages[0].role) }}", "", ""};
  auto out = RenderChat(t, {{"system", "S"}}, false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), std::string(jinja::kRaisedPrefix) + "no system");
}

TEST(ChatTemplateTest, FromFile) {
  const std::string dir = ::testing::TempDir();
  auto missing = ChatTemplateFromFile(dir + "/no-such-template.jinja");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string bad = dir + "/bad.jinja";
  ASSERT_TRUE(testing::WriteFile(bad, "{% for %}"));
  auto b = ChatTemplateFromFile(bad);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("bad.jinja: chat template: line 1"), std::string::npos) << b.status();
  auto t = ChatTemplateFromFile(SourceDirFile("tests/data/chat_templates/gemma-2-it.jinja"), "<bos>", "<eos>");
  ASSERT_TRUE(t.ok()) << t.status();
  auto out = RenderChat(*t, {{"user", " hi "}}, true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateTest, FromGguf) {
  const std::string dir = ::testing::TempDir();
  const std::string with = dir + "/with_template.gguf", without = dir + "/without_template.gguf";
  testing::GgufWriter w;
  w.StringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"})
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.eos_token_id", 2);
  ASSERT_TRUE(testing::WriteFile(without, w.Build()));
  w.String(kChatTemplateKey, "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}");
  ASSERT_TRUE(testing::WriteFile(with, w.Build()));

  auto f = GgufFile::Open(with);
  ASSERT_TRUE(f.ok()) << f.status();
  auto t = ChatTemplateFromGguf(**f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
  auto out = RenderChat(*t, {{"user", "x"}, {"assistant", "y"}}, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s>x</s>y</s>");

  auto g = GgufFile::Open(without);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ChatTemplateFromGguf(**g).status().code(), absl::StatusCode::kNotFound);
  auto fallback = ChatTemplateForModel(**g, "");
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->source, kChatMlTemplate);
  EXPECT_EQ(fallback->bos_token, "<s>");
}

// --- real templates against jinja2 ---

struct TemplateUnderTest {
  std::string file;  // in tests/data/chat_templates; "" = the ChatML fallback
  std::string bos, eos;
};

const std::vector<TemplateUnderTest>& Templates() {
  static const auto* const kTemplates = new std::vector<TemplateUnderTest>{
      {"llama-3.1-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
      {"llama-3.2-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
      {"qwen2.5-instruct.jinja", "", "<|im_end|>"},
      {"mistral-7b-instruct-v0.3.jinja", "<s>", "</s>"},
      {"mistral-7b-instruct-v0.2.jinja", "<s>", "</s>"},
      {"gemma-2-it.jinja", "<bos>", "<eos>"},
      {"phi-3-mini-instruct.jinja", "<s>", "<|endoftext|>"},
      {"phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"},
      {"deepseek-r1-distill-qwen.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
      {"", "", ""},
  };
  return *kTemplates;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Python() { return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

// render_reference.py on REQUESTS: its exit status (3 or 127: jinja2 or
// python3 missing), stderr and results.
struct Jinja2Run {
  int code = -1;
  std::string stderr_text;
  nlohmann::ordered_json results;
};
Jinja2Run RunJinja2(const nlohmann::ordered_json& requests, const std::string& name) {
  const std::string dir = ::testing::TempDir();
  const std::string req_path = dir + "/" + name + "_requests.json", out_path = dir + "/" + name + "_results.json",
                    err_path = dir + "/" + name + ".stderr";
  Jinja2Run run;
  if (!testing::WriteFile(req_path, requests.dump())) return run;
  std::filesystem::remove(out_path);
  const std::string cmd = Python() + " '" + SourceDirFile("tests/chat/render_reference.py") + "' '" + req_path +
                          "' '" + out_path + "' 2>'" + err_path + "'";
  const int rc = std::system(cmd.c_str());
  run.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  run.stderr_text = cmd + "\n" + ReadAll(err_path);
  if (run.code == 0) run.results = nlohmann::ordered_json::parse(ReadAll(out_path));
  return run;
}

// Our render of a request against jinja2's result REF: equal text, or both
// failing (with raise_exception's message when jinja2 raised). Counts which.
struct Tally {
  int matched = 0, both_raised = 0, both_failed = 0;
};
void ExpectSame(const absl::StatusOr<std::string>& out, const nlohmann::ordered_json& ref, Tally* tally) {
  if (ref["ok"].get<bool>()) {
    ASSERT_TRUE(out.ok()) << "jinja2 rendered it; we failed: " << out.status();
    EXPECT_EQ(*out, ref["text"].get<std::string>());
    if (*out == ref["text"].get<std::string>()) ++tally->matched;
    return;
  }
  const std::string err = ref["error"].get<std::string>();
  ASSERT_FALSE(out.ok()) << "jinja2 failed (" << err << "); we rendered:\n" << *out;
  if (ref["kind"] == "raised") {
    EXPECT_EQ(out.status().message(), std::string(jinja::kRaisedPrefix) + err);
    ++tally->both_raised;
  } else {
    ++tally->both_failed;
  }
}

TEST(ChatTemplateReferenceTest, RealTemplatesMatchJinja2ByteForByte) {
  const nlohmann::ordered_json convs =
      nlohmann::ordered_json::parse(ReadAll(SourceDirFile("tests/chat/conversations.json")))["conversations"];
  ASSERT_GT(convs.size(), 10u);

  // Every (template, conversation, add_generation_prompt), as one request file.
  struct Case {
    const TemplateUnderTest* t;
    ChatTemplate tmpl;
    const nlohmann::ordered_json* conv;
    bool agp;
  };
  std::vector<Case> cases;
  nlohmann::ordered_json requests = nlohmann::ordered_json::array();
  for (const TemplateUnderTest& t : Templates()) {
    const std::string path = t.file.empty() ? "" : SourceDirFile("tests/data/chat_templates/" + t.file);
    ChatTemplate tmpl{t.file.empty() ? std::string(kChatMlTemplate) : ReadAll(path), t.bos, t.eos};
    ASSERT_FALSE(tmpl.source.empty()) << path;
    for (const auto& conv : convs) {
      for (bool agp : {false, true}) {
        nlohmann::ordered_json req = {{"bos_token", t.bos},
                              {"eos_token", t.eos},
                              {"messages", conv["messages"]},
                              {"add_generation_prompt", agp},
                              {"extra", nlohmann::ordered_json::object()}};
        if (!conv.value("clock", false)) req["extra"]["date_string"] = "26 Jul 2024";
        if (t.file.empty()) {
          req["source"] = tmpl.source;
        } else {
          req["template"] = path;
        }
        if (conv.contains("tools")) req["tools"] = conv["tools"];
        if (conv.contains("extra")) req["extra"].update(conv["extra"]);
        requests.push_back(req);
        cases.push_back(Case{&t, tmpl, &conv, agp});
      }
    }
  }

  const Jinja2Run run = RunJinja2(requests, "chat_templates");
  if (run.code == 3 || run.code == 127) SPECSERVE_MISSING_INPUT("python3-jinja2 (" + run.stderr_text + ")");
  ASSERT_EQ(run.code, 0) << run.stderr_text;
  ASSERT_EQ(run.results.size(), cases.size());

  Tally tally;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(::testing::Message() << (c.t->file.empty() ? "chatml fallback" : c.t->file) << " x "
                                      << (*c.conv)["name"].get<std::string>()
                                      << " add_generation_prompt=" << c.agp);
    ChatRenderOptions o;
    o.add_generation_prompt = c.agp;
    if (c.conv->contains("tools")) o.tools = FromJson((*c.conv)["tools"]);
    if (!c.conv->value("clock", false)) o.extra = {{"date_string", Value("26 Jul 2024")}};
    if (c.conv->contains("extra")) {
      for (const auto& [k, x] : (*c.conv)["extra"].items()) o.extra.emplace_back(k, FromJson(x));
    }
    ExpectSame(RenderChat(c.tmpl, FromJson((*c.conv)["messages"]), o), run.results[i], &tally);
  }
  std::printf("chat templates: %zu renders (%zu templates x %zu conversations x add_generation_prompt); %d "
              "byte-for-byte equal to jinja2, %d raise_exception in both with the same message, %d errors in both\n",
              cases.size(), Templates().size(), convs.size(), tally.matched, tally.both_raised, tally.both_failed);
  EXPECT_EQ(static_cast<size_t>(tally.matched + tally.both_raised + tally.both_failed), cases.size());
}

// Template snippets exercising the engine's features, against jinja2 the same way.
TEST(ChatTemplateReferenceTest, EngineSnippetsMatchJinja2ByteForByte) {
  const nlohmann::ordered_json convs =
      nlohmann::ordered_json::parse(ReadAll(SourceDirFile("tests/chat/conversations.json")))["conversations"];
  nlohmann::ordered_json messages, tools;
  for (const auto& c : convs) {
    if (c["name"] == "multi_turn") messages = c["messages"];
    if (c["name"] == "tools") tools = c["tools"];
  }
  ASSERT_FALSE(messages.is_null());
  ASSERT_FALSE(tools.is_null());
  const nlohmann::ordered_json snippets =
      nlohmann::ordered_json::parse(ReadAll(SourceDirFile("tests/chat/snippets.json")))["snippets"];
  nlohmann::ordered_json requests = nlohmann::ordered_json::array();
  for (const auto& src : snippets) {
    requests.push_back({{"source", src},
                        {"bos_token", "<s>"},
                        {"eos_token", "</s>"},
                        {"messages", messages},
                        {"tools", tools},
                        {"add_generation_prompt", true},
                        {"extra", {{"date_string", "26 Jul 2024"}}}});
  }
  const Jinja2Run run = RunJinja2(requests, "chat_snippets");
  if (run.code == 3 || run.code == 127) SPECSERVE_MISSING_INPUT("python3-jinja2 (" + run.stderr_text + ")");
  ASSERT_EQ(run.code, 0) << run.stderr_text;
  ASSERT_EQ(run.results.size(), snippets.size());
  Tally tally;
  for (size_t i = 0; i < snippets.size(); ++i) {
    const std::string src = snippets[i].get<std::string>();
    SCOPED_TRACE(src);
    ChatRenderOptions o;
    o.add_generation_prompt = true;
    o.tools = FromJson(tools);
    o.extra = {{"date_string", Value("26 Jul 2024")}};
    ExpectSame(RenderChat(ChatTemplate{src, "<s>", "</s>"}, FromJson(messages), o), run.results[i], &tally);
  }
  std::printf("snippets: %zu; %d byte-for-byte equal to jinja2, %d raise_exception in both, %d errors in both\n",
              snippets.size(), tally.matched, tally.both_raised, tally.both_failed);
}

}  // namespace
}  // namespace specserve
