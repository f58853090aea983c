// libFuzzer target: chat/ on arbitrary template text, as a GGUF's
// tokenizer.chat_template would bring it. Each input is parsed with Jinja's
// default syntax and with HF's (trim_blocks, lstrip_blocks) and rendered on a
// fixed conversation with tools, under small limits. A template may fail
// (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED at a limit), never crash, hang or
// overrun the output limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "fuzz/fuzz_common.h"

namespace specserve {
namespace {

constexpr size_t kMaxOutput = size_t{1} << 20;

jinja::Value Conversation() {
  std::vector<jinja::Value> msgs;
  for (const auto& [role, content] : std::vector<std::pair<const char*, const char*>>{
           {"system", "  You are terse.  "}, {"user", "Hi {{ x }} \xE4\xB8\x96"}, {"assistant", "7"}, {"user", ""}}) {
    msgs.push_back(*jinja::Value::Dict({{"role", jinja::Value(role)}, {"content", jinja::Value(content)}}));
  }
  auto args = *jinja::Value::Dict({{"city", jinja::Value("Paris")}});
  auto call = *jinja::Value::Dict({{"name", jinja::Value("get")}, {"arguments", args}});
  msgs.push_back(*jinja::Value::Dict(
      {{"role", jinja::Value("assistant")},
       {"content", jinja::Value::None()},
       {"tool_calls", *jinja::Value::List({*jinja::Value::Dict({{"id", jinja::Value("abcdefghi")}, {"function", call}})})}}));
  return *jinja::Value::List(std::move(msgs));
}

void CheckResult(const absl::StatusOr<std::string>& out) {
  if (out.ok()) {
    FUZZ_CHECK(out->size() <= kMaxOutput, "output of %zu bytes", out->size());
    return;
  }
  const absl::StatusCode c = out.status().code();
  FUZZ_CHECK(c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kResourceExhausted, "status %s",
             out.status().ToString().c_str());
}

}  // namespace
}  // namespace specserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specserve;
  static const jinja::Value kMessages = Conversation();
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  jinja::RenderLimits limits;
  limits.max_output_bytes = kMaxOutput;
  limits.max_steps = 200000;
  limits.max_call_depth = 8;

  auto plain = jinja::Template::Parse(src);
  if (plain.ok()) CheckResult(plain->Render({{"messages", kMessages}, {"x", jinja::Value(3)}}, limits));

  ChatTemplate t{std::string(src), "<s>", "</s>"};
  ChatRenderOptions o;
  o.add_generation_prompt = (size & 1) != 0;
  o.tools = *jinja::Value::List({*jinja::Value::Dict({{"type", jinja::Value("function")}})});
  o.limits = limits;
  CheckResult(RenderChat(t, kMessages, o));
  return 0;
}
