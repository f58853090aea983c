#include "constrain/json_schema.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "constrain/json_number.h"
#include "constrain/json_text.h"
#include "constrain/matcher.h"

namespace specserve::constrain {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxIndent = 16;  // spaces after a newline between tokens

// Keywords that only annotate: accepted and ignored.
const absl::flat_hash_set<std::string>& Annotations() {
  static const auto* k = new absl::flat_hash_set<std::string>{
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$defs", "definitions"};
  return *k;
}
const absl::flat_hash_set<std::string>& Supported() {
  static const auto* k = new absl::flat_hash_set<std::string>{
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
      "enum", "const", "anyOf", "$ref", "minLength", "maxLength", "format", "pattern",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return *k;
}

#define RETURN_TOO_BIG()                                                                          \
  return absl::ResourceExhaustedError(absl::StrFormat(                                            \
      "schema at '#%s': a length or item count passes the grammar's limit of %d states", ptr,     \
      limits_.max_states))
#define RETURN_IF_OVERFLOW()                                                                      \
  do {                                                                                            \
    if (b_.overflow())                                                                            \
      return absl::ResourceExhaustedError(absl::StrFormat(                                        \
          "the schema's grammar passes its limits (%d states, %d rules)", limits_.max_states,     \
          limits_.max_rules));                                                                    \
  } while (0)

std::string EscapePointerToken(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class Compiler {
 public:
  Compiler(const json& root, const GrammarLimits& limits) : root_(root), limits_(limits), b_(limits) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Run(bool any_object) {
    const int32_t root_rule = b_.NewRule();
    ws_rule_ = b_.NewRule();
    b_.SetRuleBody(ws_rule_, b_.Alt({b_.Empty(), b_.Literal(" "),
                                     b_.Seq(b_.Literal("\n"), b_.Repeat([&] { return b_.Literal(" "); }, 0, kMaxIndent))}));
    Frag body;
    if (any_object) {
      body = AnyObject();
    } else {
      auto f = Compile(root_, "", 0);
      if (!f.ok()) return f.status();
      body = *f;
    }
    const int32_t body_rule = b_.NewRule();
    b_.SetRuleBody(body_rule, body);
    b_.SetRuleBody(root_rule, b_.Seq({Ws(), b_.Call(body_rule), Ws()}));
    RETURN_IF_OVERFLOW();
    auto g = std::make_shared<Grammar>(b_.Finish(any_object ? "json_object" : "json_schema"));
    std::shared_ptr<const Grammar> out = std::move(g);
    // A schema whose every path recurses before writing a byte ($ref: "#"
    // as its own body) admits no document: refuse it rather than mask all.
    GrammarMatcher body_start(out, body_rule);
    if (!body_start.CanContinue() && !body_start.IsComplete())
      return absl::InvalidArgumentError("the schema admits no document (a $ref cycle that writes nothing)");
    return out;
  }

 private:

  Frag Ws() { return b_.Call(ws_rule_); }
  Frag Tok(const std::string& s) { return b_.Literal(s); }

  absl::Status Bad(const std::string& ptr, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("schema at '", ptr.empty() ? "#" : "#" + ptr, "': ", what));
  }

  // --- generic JSON (json_object mode, schemas without constraints) ---
  int32_t StringCharRule() {
    if (char_rule_ >= 0) return char_rule_;
    char_rule_ = b_.NewRule();
    CharSet any;
    any.ascii.set();
    any.non_ascii = true;
    b_.SetRuleBody(char_rule_, CharSetFrag(&b_, any, /*any_escape=*/true));
    return char_rule_;
  }

  int32_t AnyStringRule() {
    if (string_rule_ >= 0) return string_rule_;
    string_rule_ = b_.NewRule();
    const int32_t c = StringCharRule();
    b_.SetRuleBody(string_rule_, b_.Seq({Tok("\""), b_.Star(b_.Call(c)), Tok("\"")}));
    return string_rule_;
  }

  int32_t AnyValueRule() {
    if (value_rule_ >= 0) return value_rule_;
    value_rule_ = b_.NewRule();
    const int32_t v = value_rule_;
    Frag arr = b_.Seq({Tok("["), Ws(),
                       b_.Opt(b_.Seq({b_.Call(v), b_.Star(b_.Seq({Ws(), Tok(","), Ws(), b_.Call(v)})), Ws()})),
                       Tok("]")});
    b_.SetRuleBody(v, b_.Alt({AnyObject(), arr, b_.Call(AnyStringRule()), AnyNumber(&b_), Tok("true"),
                              Tok("false"), Tok("null")}));
    return v;
  }

  Frag AnyObject() {
    const int32_t v = AnyValueRule();
    const int32_t s = AnyStringRule();
    auto member = [&] { return b_.Seq({b_.Call(s), Ws(), Tok(":"), Ws(), b_.Call(v)}); };
    return b_.Seq({Tok("{"), Ws(), b_.Opt(b_.Seq({member(), b_.Star(b_.Seq({Ws(), Tok(","), Ws(), member()})), Ws()})),
                   Tok("}")});
  }

  // --- schemas ---
  absl::StatusOr<Frag> Compile(const json& s, const std::string& ptr, int depth) {
    if (depth > limits_.max_schema_depth)
      return absl::ResourceExhaustedError(absl::StrFormat("schema at '#%s' nests deeper than %d", ptr,
                                                          limits_.max_schema_depth));
    RETURN_IF_OVERFLOW();
    if (s.is_boolean()) {
      if (s.get<bool>()) return b_.Call(AnyValueRule());
      return Bad(ptr, "the schema false admits no value");
    }
    if (!s.is_object()) return Bad(ptr, "a schema must be an object or a boolean");
    for (const auto& [k, _] : s.items()) {
      if (!Supported().contains(k) && !Annotations().contains(k))
        return Bad(ptr, absl::StrCat("unsupported keyword \"", k, "\""));
    }
    if (s.contains("$ref")) {
      for (const char* k : {"type", "anyOf", "enum", "const", "properties", "items"})
        if (s.contains(k)) return Bad(ptr, absl::StrCat("\"$ref\" beside \"", k, "\" is not supported"));
      return Ref(s["$ref"], ptr, depth);
    }
    if (s.contains("const")) return Tok(s["const"].dump());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Bad(ptr + "/enum", "\"enum\" must be a non-empty array");
      std::vector<Frag> alts;
      for (const json& v : e) alts.push_back(Tok(v.dump()));
      return b_.Alt(alts);
    }
    if (s.contains("anyOf")) {
      if (s.contains("type")) return Bad(ptr, "\"anyOf\" beside \"type\" is not supported");
      const json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) return Bad(ptr + "/anyOf", "\"anyOf\" must be a non-empty array");
      std::vector<Frag> alts;
      for (size_t i = 0; i < a.size(); ++i) {
        auto f = Compile(a[i], absl::StrCat(ptr, "/anyOf/", i), depth + 1);
        if (!f.ok()) return f.status();
        alts.push_back(*f);
      }
      return b_.Alt(alts);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) return Bad(ptr + "/type", "\"type\" entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Bad(ptr + "/type", "\"type\" must be a string or a non-empty array of strings");
      }
    } else if (s.contains("properties")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      return b_.Call(AnyValueRule());
    }
    std::vector<Frag> alts;
    for (const std::string& t : types) {
      auto f = CompileType(t, s, ptr, depth);
      if (!f.ok()) return f.status();
      alts.push_back(*f);
    }
    return alts.size() == 1 ? alts[0] : b_.Alt(alts);
  }

  absl::StatusOr<Frag> CompileType(const std::string& t, const json& s, const std::string& ptr, int depth) {
    if (t == "null") return Tok("null");
    if (t == "boolean") return b_.Alt({Tok("true"), Tok("false")});
    if (t == "string") return String(s, ptr);
    if (t == "integer" || t == "number") {
      auto bounds = ReadBounds(s, t == "integer");
      if (!bounds.ok()) return Bad(ptr, std::string(bounds.status().message()));
      auto f = t == "integer" ? IntegerFrag(&b_, *bounds) : NumberFrag(&b_, *bounds);
      if (!f.ok()) return Bad(ptr, std::string(f.status().message()));
      return *f;
    }
    if (t == "object") return Object(s, ptr, depth);
    if (t == "array") return Array(s, ptr, depth);
    return Bad(ptr + "/type", absl::StrCat("unknown type \"", t, "\""));
  }

  absl::StatusOr<Frag> String(const json& s, const std::string& ptr) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format") || s.contains("pattern")) {
      if (has_len) return Bad(ptr, "\"minLength\"/\"maxLength\" beside \"format\"/\"pattern\" is not supported");
      if (s.contains("format") && s.contains("pattern")) return Bad(ptr, "\"format\" beside \"pattern\" is not supported");
      std::string pattern;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) return Bad(ptr + "/pattern", "\"pattern\" must be a string");
        pattern = s["pattern"].get<std::string>();
      } else {
        if (!s["format"].is_string()) return Bad(ptr + "/format", "\"format\" must be a string");
        const std::string fmt = s["format"].get<std::string>();
        pattern = FormatPattern(fmt);
        if (pattern.empty()) return Bad(ptr + "/format", absl::StrCat("unsupported format \"", fmt, "\""));
      }
      auto f = PatternFrag(&b_, pattern);
      if (!f.ok()) {
        if (absl::IsResourceExhausted(f.status())) return f.status();
        return Bad(ptr + (s.contains("pattern") ? "/pattern" : "/format"), std::string(f.status().message()));
      }
      return b_.Seq({Tok("\""), *f, Tok("\"")});
    }
    int64_t min = 0, max = -1;
    for (const char* k : {"minLength", "maxLength"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0)
        return Bad(ptr + "/" + k, absl::StrCat("\"", k, "\" must be a non-negative integer"));
    }
    if (s.contains("minLength")) min = s["minLength"].get<int64_t>();
    if (s.contains("maxLength")) max = s["maxLength"].get<int64_t>();
    if (max >= 0 && max < min) return Bad(ptr, "\"maxLength\" is below \"minLength\"");
    if (min > limits_.max_states || max > limits_.max_states) RETURN_TOO_BIG();
    if (min == 0 && max < 0) return b_.Call(AnyStringRule());
    const int32_t c = StringCharRule();
    return b_.Seq({Tok("\""), b_.Repeat([&] { return b_.Call(c); }, min, max), Tok("\"")});
  }


  static std::string FormatPattern(const std::string& fmt) {
    // Years 0001-9999: Python's date (which jsonschema checks with) has no year 0.
    static const std::string kDate =
        "([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8]))|((0[13-9]|1[0-2])-(29|30))|((0[13578]|1[02])-31))";
    static const std::string kTime =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    if (fmt == "date") return "^" + kDate + "$";
    if (fmt == "time") return "^" + kTime + "$";
    if (fmt == "date-time") return "^" + kDate + "T" + kTime + "$";
    if (fmt == "email")
      return "^[A-Za-z0-9._%+-]{1,32}@[A-Za-z0-9-]{1,32}(\\.[A-Za-z0-9-]{1,32}){0,3}\\.[A-Za-z]{2,12}$";
    if (fmt == "uuid")
      return "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
    return "";
  }

  absl::StatusOr<Frag> Object(const json& s, const std::string& ptr, int depth) {
    const bool closed = s.contains("additionalProperties") && s["additionalProperties"] == json(false);
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean())
      return Bad(ptr + "/additionalProperties", "\"additionalProperties\" must be false (or absent)");
    if (!s.contains("properties")) {
      if (closed) return b_.Seq({Tok("{"), Ws(), Tok("}")});
      return AnyObject();
    }
    const json& props = s["properties"];
    if (!props.is_object()) return Bad(ptr + "/properties", "\"properties\" must be an object");
    absl::flat_hash_set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Bad(ptr + "/required", "\"required\" must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Bad(ptr + "/required", "\"required\" entries must be strings");
        if (!props.contains(r.get<std::string>()))
          return Bad(ptr + "/required", absl::StrCat("required property \"", r.get<std::string>(),
                                                     "\" is not in \"properties\""));
        required.insert(r.get<std::string>());
      }
    }
    // Two lanes through the properties: nothing written yet (lane0) and at
    // least one written (lane1, where the next needs a comma first).
    const Frag open = b_.Seq(Tok("{"), Ws());
    int32_t lane0 = open.out;
    int32_t lane1 = b_.NewState();
    for (const auto& [name, sub] : props.items()) {
      auto value = Compile(sub, absl::StrCat(ptr, "/properties/", EscapePointerToken(name)), depth + 1);
      if (!value.ok()) return value.status();
      const Frag kv = b_.Seq({Tok(json(name).dump()), Ws(), Tok(":"), Ws(), *value});
      const Frag comma = b_.Seq({Ws(), Tok(","), Ws()});
      const int32_t next0 = b_.NewState();
      const int32_t next1 = b_.NewState();
      b_.Eps(lane0, kv.in);
      b_.Eps(lane1, comma.in);
      b_.Eps(comma.out, kv.in);
      b_.Eps(kv.out, next1);
      if (!required.contains(name)) {
        b_.Eps(lane0, next0);
        b_.Eps(lane1, next1);
      }
      lane0 = next0;
      lane1 = next1;
      RETURN_IF_OVERFLOW();
    }
    const Frag close = b_.Seq(Ws(), Tok("}"));
    b_.Eps(lane0, close.in);
    b_.Eps(lane1, close.in);
    return Frag{open.in, close.out};
  }

  absl::StatusOr<Frag> Array(const json& s, const std::string& ptr, int depth) {
    int64_t min = 0, max = -1;
    for (const char* k : {"minItems", "maxItems"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0)
        return Bad(ptr + "/" + k, absl::StrCat("\"", k, "\" must be a non-negative integer"));
    }
    if (s.contains("minItems")) min = s["minItems"].get<int64_t>();
    if (s.contains("maxItems")) max = s["maxItems"].get<int64_t>();
    if (max >= 0 && max < min) return Bad(ptr, "\"maxItems\" is below \"minItems\"");
    if (min > limits_.max_states || max > limits_.max_states) RETURN_TOO_BIG();
    int32_t item_rule;
    if (s.contains("items")) {
      if (s["items"].is_array()) return Bad(ptr + "/items", "tuple \"items\" (an array) is not supported");
      item_rule = b_.NewRule();
      auto f = Compile(s["items"], ptr + "/items", depth + 1);
      if (!f.ok()) return f.status();
      b_.SetRuleBody(item_rule, *f);
    } else {
      item_rule = AnyValueRule();
    }
    const Frag open = b_.Seq(Tok("["), Ws());
    const Frag close = b_.Seq(Ws(), Tok("]"));
    if (max == 0) return b_.Seq(open, close);
    auto more = [&] { return b_.Seq({Ws(), Tok(","), Ws(), b_.Call(item_rule)}); };
    Frag items = b_.Seq(b_.Call(item_rule), b_.Repeat(more, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1));
    if (min == 0) items = b_.Opt(items);
    RETURN_IF_OVERFLOW();
    return b_.Seq({open, items, close});
  }

  absl::StatusOr<Frag> Ref(const json& ref, const std::string& ptr, int depth) {
    if (!ref.is_string()) return Bad(ptr + "/$ref", "\"$ref\" must be a string");
    const std::string r = ref.get<std::string>();
    if (r != "#" && r.rfind("#/", 0) != 0)
      return Bad(ptr + "/$ref", absl::StrCat("only local references (\"#/$defs/...\") are supported, not \"", r, "\""));
    auto it = refs_.find(r);
    if (it != refs_.end()) return b_.Call(it->second);
    const json* target = &root_;
    if (r != "#") {
      try {
        target = &root_.at(json::json_pointer(r.substr(1)));
      } catch (const json::exception&) {
        return Bad(ptr + "/$ref", absl::StrCat("\"$ref\" \"", r, "\" names nothing in the schema"));
      }
    }
    const int32_t rule = b_.NewRule();
    refs_[r] = rule;
    auto f = Compile(*target, r.substr(1), depth + 1);
    if (!f.ok()) return f.status();
    b_.SetRuleBody(rule, *f);
    return b_.Call(rule);
  }

  const json& root_;
  GrammarLimits limits_;
  GrammarBuilder b_;
  int32_t ws_rule_ = -1, char_rule_ = -1, string_rule_ = -1, value_rule_ = -1;
  absl::flat_hash_map<std::string, int32_t> refs_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                                                 const GrammarLimits& limits) {
  return Compiler(schema, limits).Run(false);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::json& schema,
                                                                 const GrammarLimits& limits) {
  return CompileJsonSchema(nlohmann::ordered_json::parse(schema.dump()), limits);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchemaText(absl::string_view text,
                                                                     const GrammarLimits& limits) {
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("the schema is not valid JSON");
  return CompileJsonSchema(schema, limits);
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileAnyJsonObject(const GrammarLimits& limits) {
  static const nlohmann::ordered_json kEmpty = nlohmann::ordered_json::object();
  return Compiler(kEmpty, limits).Run(true);
}

}  // namespace specserve::constrain
