// A Jinja2 template engine for the subset chat templates use (see
// jinja_parser.h for the grammar, jinja_builtins.h for filters, tests and
// methods). Semantics follow Jinja2 3.1 with its default Undefined (an
// undefined name prints as nothing; an attribute of one is an error) and
// Python's value semantics.
//
// The template text is untrusted (it comes from a GGUF file): a bad template
// is an absl error, never a crash, and rendering is bounded in output size,
// steps and call depth.
//
//   ASSIGN_OR_RETURN(Template t, Template::Parse(src, kHfChatSyntax));
//   ASSIGN_OR_RETURN(std::string text, t.Render({{"messages", msgs}, ...}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace specserve::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // also bounds every string built on the way
  int64_t max_steps = 10'000'000;              // statements + expression nodes evaluated
  int max_call_depth = 16;                     // macro calls in progress
};

// Variables a render sees, besides the globals (range, namespace, dict,
// raise_exception, strftime_now), which they may shadow.
using Vars = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  // INVALID_ARGUMENT with the line and column of the first syntax error.
  static absl::StatusOr<Template> Parse(std::string_view source, const Syntax& syntax = {});

  // INVALID_ARGUMENT for an error while rendering (a type error, an
  // undefined value's attribute, raise_exception: message kRaisedPrefix +
  // the template's text); RESOURCE_EXHAUSTED past a limit.
  absl::StatusOr<std::string> Render(const Vars& vars, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const std::string> source_;  // normalised, for error positions
  std::shared_ptr<const Body> body_;
};

}  // namespace specserve::jinja
