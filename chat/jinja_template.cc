#include "chat/jinja_template.h"

#include "chat/jinja_eval.h"
#include "chat/jinja_parser.h"

namespace specserve::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source, const Syntax& syntax) {
  auto normalised = std::make_shared<std::string>();
  auto tokens = Lex(source, syntax, normalised.get());
  if (!tokens.ok()) return tokens.status();
  auto body = jinja::Parse(*tokens, *normalised);
  if (!body.ok()) return body.status();
  Template t;
  t.source_ = std::move(normalised);
  t.body_ = std::make_shared<const Body>(std::move(*body));
  return t;
}

absl::StatusOr<std::string> Template::Render(const Vars& vars, const RenderLimits& limits) const {
  return Evaluate(*body_, *source_, vars, limits);
}

}  // namespace specserve::jinja
