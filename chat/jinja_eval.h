// Renders a parsed template: scopes (a for-loop iteration and a macro call
// each get their own, as in Jinja2, so `set` inside a loop does not leak out
// of it; namespace() is the way out), the `loop` variable, macros, and the
// step, depth and output bounds of RenderLimits.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_template.h"

namespace specserve::jinja {

absl::StatusOr<std::string> Evaluate(const Body& body, std::string_view source, const Vars& vars,
                                     const RenderLimits& limits);

}  // namespace specserve::jinja
