#include "constrain/grammar_compiler.h"

#include <utility>

#include "common/status_macros.h"
#include "constrain/grammar_filter.h"
#include "constrain/json_schema.h"

namespace specserve::constrain {

absl::StatusOr<std::shared_ptr<const TokenFilter>> GrammarCompiler::Compile(absl::string_view schema_text,
                                                                             std::vector<int32_t> end_ids) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, CompileJsonSchemaText(schema_text, limits_));
  return std::shared_ptr<const TokenFilter>(
      MakeGrammarFilter(std::move(grammar), vocab_, std::move(end_ids), std::make_shared<MaskCache>()));
}

}  // namespace specserve::constrain
