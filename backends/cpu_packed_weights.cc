#include "backends/cpu_packed_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

#include "kernels/cpu_matmul_packed.h"

namespace specserve {
namespace {

// The original of a packed matrix is not read again (the int8 kernel reads
// the packed copy): its whole pages are handed back to the kernel, so the
// process holds the weights once. MADV_PAGEOUT is a hint: the pages of the
// mapped file come back from it if something does read them (the token
// embeddings when the output matrix is tied to them), and on a kernel
// without it (before Linux 5.4) nothing happens.
void ReleasePages(const uint8_t* data, int64_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace

std::unique_ptr<PackedWeights> PackWeightsForInt8(const ModelWeights& w, int threads) {
  auto p = std::make_unique<PackedWeights>();
  p->views.tok_embd = w.tok_embd;
  p->views.layers = w.layers;
  p->views.output_norm = w.output_norm;
  p->views.output = w.output;
  p->views.rope_freqs = w.rope_freqs;
  std::vector<MatrixView*> todo;
  auto add = [&](MatrixView& m) {
    if (cpu::PackableForInt8(m) && cpu::PackedKernelRuns(m.type)) todo.push_back(&m);
  };
  for (LayerWeights& L : p->views.layers) {
    for (MatrixView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) add(*m);
  }
  add(p->views.output);
  p->buffers.resize(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) p->buffers[i].reset(new uint8_t[cpu::PackedBytes(*todo[i])]);
  // The matrices are independent: each thread takes the next one.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
      cpu::PackForInt8(*todo[i], p->buffers[i].get());
      ReleasePages(todo[i]->data, todo[i]->rows * static_cast<int64_t>(todo[i]->row_bytes));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < todo.size(); ++i) todo[i]->packed = p->buffers[i].get();
  return p;
}

}  // namespace specserve
