// GgufFile::CheckDataLayout: the tensors' data, in offset order, tile the
// data section exactly (aligned, no overlap, no gap, nothing trailing).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/gguf.h"
#include "common/tensor_types.h"

namespace specserve {

namespace {

// "'name' (F16 [288, 288], 165888 bytes at data offset 91616)".
std::string DescribeTensor(const GgufTensor& t) {
  return absl::StrFormat("'%s' (%s %s, %d bytes at data offset %d)", t.name,
                         std::string(GgmlTypeName(t.type)), t.ShapeString(), t.nbytes, t.offset);
}

}  // namespace

absl::Status GgufFile::CheckDataLayout() const {
  if (tensors_.empty()) return absl::OkStatus();
  std::vector<const GgufTensor*> order;
  order.reserve(tensors_.size());
  for (const GgufTensor& t : tensors_) order.push_back(&t);
  // Ties (two tensors at one offset) keep the file's order.
  std::stable_sort(order.begin(), order.end(), [](const GgufTensor* a, const GgufTensor* b) {
    return a->offset < b->offset;
  });
  const uint64_t align = alignment_;
  // Open() placed every tensor inside the file: these sums cannot overflow.
  auto end_of = [](const GgufTensor* t) { return t->offset + t->nbytes; };
  auto padded = [align](uint64_t x) { return (x + align - 1) / align * align; };
  if (order[0]->offset != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s is the first in the data section but starts at data offset %d, not 0: "
        "%d bytes belong to no tensor (a moved offset)",
        DescribeTensor(*order[0]), order[0]->offset, order[0]->offset));
  }
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensor* prev = order[i - 1];
    const GgufTensor* t = order[i];
    if (t->offset < end_of(prev)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor %s overlaps tensor %s, which ends at data offset %d: tensors must not share "
          "bytes (an offset was moved, or the type or shape of '%s' does not match its data)",
          DescribeTensor(*t), DescribeTensor(*prev), end_of(prev), prev->name));
    }
    const uint64_t want = padded(end_of(prev));
    if (t->offset != want) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%d unused bytes between tensor %s, which ends at data offset %d, and tensor %s, "
          "expected at data offset %d (the end rounded up to the alignment %d): the type or "
          "shape of '%s' does not match its data, or the offset of '%s' was moved",
          t->offset - end_of(prev), DescribeTensor(*prev), end_of(prev), DescribeTensor(*t), want,
          align, prev->name, t->name));
    }
  }
  const GgufTensor* last = order.back();
  const uint64_t data_bytes = size_ - data_start_;
  if (data_bytes - end_of(last) >= align) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d unused bytes after tensor %s, the last in the data section, up to the end of the file "
        "at data offset %d (at most %d bytes of padding may follow it): its type or shape does not "
        "match its data, or its offset was moved",
        data_bytes - end_of(last), DescribeTensor(*last), data_bytes, align - 1));
  }
  return absl::OkStatus();
}

}  // namespace specserve
