// The --shape of `specserve inflate`: a named real-model shape or five
// numbers. (Header-only, as tools/inflate.h: tools/*.cc all go into the CLI.)
//
// Named shapes keep the Llama model's residual width, layers and
// feed-forward width (Llama1BShape / Llama8BShape in tools/inflate.h) and
// choose the heads for the small model's head size hd:
//   kv heads  = max(small's, ceil(kv width / hd))   (kv width 512 for 1B, 1024 for 8B)
//   group     = max(small's group, 4)                (Llama 3's 4 query heads per kv head)
//   kv heads are then raised until heads x hd is a multiple of 256, so that
//   K-quant super-blocks tile attn_output's rows.
// With hd 64 that is Llama-3.2-1B's 32 / 8 heads; code-target-7m (hd 48, 6 /
// 2 heads) gets 48 / 12 heads at llama-1b, a query width of 2304 beside the
// residual width 2048 (so the file carries attention.key_length).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/model_config.h"
#include "tools/inflate.h"

namespace specserve::inflate {

// The named shapes ParseShape knows, for help texts.
inline constexpr char kShapeNames[] = "llama-1b, llama-8b";

inline Shape NamedShape(Shape llama, int32_t kv_width, const ModelConfig& small) {
  const int32_t hd = small.head_dim;
  const int32_t group = std::max(small.n_head / small.n_head_kv, 4);
  int32_t kv = std::max(small.n_head_kv, (kv_width + hd - 1) / hd);
  while ((int64_t{kv} * group * hd) % 256 != 0) ++kv;
  llama.n_head_kv = kv;
  llama.n_head = kv * group;
  return llama;
}

// SPEC is a name of kShapeNames or "D,L,H,HKV,FF" (n_embd, layers, query
// heads, kv heads, feed-forward width). INVALID_ARGUMENT naming SPEC
// otherwise. Whether the shape contains SMALL is Inflate's check.
inline absl::StatusOr<Shape> ParseShape(const std::string& spec, const ModelConfig& small) {
  if (spec == "llama-1b") return NamedShape(Llama1BShape(small.head_dim), 512, small);
  if (spec == "llama-8b") return NamedShape(Llama8BShape(small.head_dim), 1024, small);
  const std::vector<std::string> parts = absl::StrSplit(spec, ',');
  int32_t v[5];
  bool ok = parts.size() == 5;
  for (size_t i = 0; ok && i < 5; ++i) ok = absl::SimpleAtoi(parts[i], &v[i]) && v[i] > 0 && v[i] <= (1 << 20);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", spec, "' is neither a named shape (", kShapeNames,
                                                   ") nor five positive integers D,L,H,HKV,FF"));
  }
  return Shape{v[0], v[1], v[2], v[3], v[4]};
}

}  // namespace specserve::inflate
