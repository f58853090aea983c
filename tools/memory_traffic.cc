#include "tools/memory_traffic.h"

#include <immintrin.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace specserve::cli {
namespace {

int64_t Bytes(const MatrixView& m) { return m.rows * static_cast<int64_t>(m.row_bytes); }

// Sums [p, p + n) as 32-byte integer loads (4 independent chains); the sum
// keeps the loads from being optimised away.
int64_t ReadAll(const uint8_t* p, size_t n) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (size_t i = 0; i + 128 <= n; i += 128) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_add_epi64(acc[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * k)));
    }
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  return _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 3);
}

}  // namespace

std::vector<const MatrixView*> TokenMatrices(const ModelWeights& w) {
  std::vector<const MatrixView*> out{&w.output};
  for (const LayerWeights& l : w.layers) out.insert(out.end(), {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down});
  return out;
}

double FastestParallelRun(int threads, int reps, const std::function<void(int)>& body) {
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(body, t);
    for (auto& t : ts) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int64_t WeightBytesPerToken(const ModelWeights& w) {
  int64_t total = static_cast<int64_t>(w.tok_embd.row_bytes);
  for (const MatrixView* m : TokenMatrices(w)) total += Bytes(*m);
  return total;
}

namespace {

double MeasureHere(int threads) {
  // 512 MiB: sixteen times the 32 MiB L3 of this project's machines.
  constexpr size_t kBytes = size_t{512} << 20;
  std::vector<uint8_t> buf(kBytes);
  std::memset(buf.data(), 1, buf.size());
  const size_t per = kBytes / threads / 128 * 128;
  std::vector<int64_t> sums(threads);
  const double s = FastestParallelRun(threads, 4, [&](int t) { sums[t] = ReadAll(buf.data() + t * per, per); });
  volatile int64_t keep = sums[0];
  (void)keep;
  return per * threads / s / 1e9;
}

}  // namespace

// In a child process, so that the 512 MiB buffer does not count in the
// caller's peak resident memory (which `specserve bench` reports).
double MeasureReadBandwidthGBs(int threads) {
  int fds[2];
  if (pipe(fds) != 0) return MeasureHere(threads);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return MeasureHere(threads);
  }
  if (pid == 0) {
    close(fds[0]);
    const double gbs = MeasureHere(threads);
    const ssize_t n = write(fds[1], &gbs, sizeof(gbs));
    _exit(n == sizeof(gbs) ? 0 : 1);
  }
  close(fds[1]);
  double gbs = 0;
  const ssize_t n = read(fds[0], &gbs, sizeof(gbs));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return n == sizeof(gbs) ? gbs : 0;
}

}  // namespace specserve::cli
