// End-to-end test harness: starts specserve-target, specserve-draft and
// specserve-coordinator as real child processes on free loopback ports,
// waits for grpc.health.v1 SERVING, scrapes /metrics over plain HTTP, and
// computes the reference (plain greedy decoding in this process).
// Header-only: tests/CMakeLists.txt builds each *_test.cc on its own.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/weights.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/metrics_text.h"
#include "spec/sampling.h"
#include "specserve/v1/generation.grpc.pb.h"
#include "tests/test_paths.h"

namespace specserve::e2e {

// A port nobody uses right now, taken below the kernel's ephemeral range
// (32768+ by default): a port from bind(0) can meanwhile become the source
// port of some outgoing connection (a scrape, a gRPC channel of a test
// running in parallel) and then the server cannot listen on it. Each test
// process starts at its own pid-derived offset, so parallel tests rarely meet.
inline int FreePort() {
  static int next = 0;
  const int offset = static_cast<int>(getpid() % 1000) * 11;
  for (int attempt = 0; attempt < 4000; ++attempt) {
    const int port = 20000 + (offset + next++) % 12000;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

inline std::string Loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

// A child process with stdout and stderr in a log file.
class Process {
 public:
  Process(const std::string& binary, const std::vector<std::string>& args, const std::string& log)
      : name_(binary), log_(log) {
    std::vector<std::string> argv_s = {testing::BinDir() + "/" + binary};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    // Everything is allocated before fork: the child of a threaded process
    // (gRPC's) may only make async-signal-safe calls before exec.
    std::vector<char*> argv;
    for (std::string& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fd, 1);  // dup2'd descriptors do not inherit O_CLOEXEC
      dup2(fd, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fd);
  }
  ~Process() { Kill(SIGKILL); }

  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Exit code, or -1 if it is still running after `timeout`.
  int Wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > until) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string LogText() const {  // the whole log
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string LogTail() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    return name_ + " log:\n" + (s.size() > 3000 ? s.substr(s.size() - 3000) : s);
  }

 private:
  std::string name_, log_;
  pid_t pid_ = -1;
};

// grpc.health.v1 status of the server ("" service), or UNKNOWN when it does not answer.
inline grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& addr) {
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  grpc::health::v1::HealthCheckResponse resp;
  if (!stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return resp.status();
}

inline bool WaitServing(const std::string& addr, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (Health(addr) == grpc::health::v1::HealthCheckResponse::SERVING) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// GET http://127.0.0.1:port/metrics with a plain socket.
inline std::string Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

// Sum of the samples of `name` whose label set contains every `labels` part
// (e.g. {"status=\"ok\""}); -1 when no sample matches.
inline double Metric(const std::string& text, const std::string& name, const std::vector<std::string>& labels = {}) {
  return rpc::SumSamples(text, name, labels);
}

// Plain greedy decoding in this process: the reference output.
inline std::vector<TokenId> PlainGreedy(const std::string& model_path, const std::vector<TokenId>& prompt, int n,
                                        TokenId eos) {
  auto model = Model::Load(model_path);
  EXPECT_TRUE(model.ok()) << model.status();
  auto backend = MakeCpuBackend(**model, BackendOptions());
  EXPECT_TRUE(backend.ok()) << backend.status();
  KvSeq seq;
  std::vector<float> logits;
  std::vector<TokenId> out;
  std::vector<TokenId> feed = prompt;
  const int32_t vocab = (*model)->config.vocab;
  while (static_cast<int>(out.size()) < n) {
    EXPECT_TRUE((*backend)->Forward({ForwardSeq{&seq, feed, 1}}, &logits).ok());
    const TokenId t = Argmax(logits.data(), vocab);
    if (t == eos) break;
    out.push_back(t);
    feed = {t};
  }
  (*backend)->kv_pool().Release(seq);
  return out;
}

// PlainGreedy memoised per (model, prompt): greedy output of n tokens is the
// prefix of any longer run, and the CPU reference is the slow part of a test.
inline std::vector<TokenId> CachedGreedy(const std::string& model_path, const std::vector<TokenId>& prompt, int n,
                                         TokenId eos) {
  static std::map<std::pair<std::string, std::vector<TokenId>>, std::vector<TokenId>> cache;
  static std::map<std::pair<std::string, std::vector<TokenId>>, int> asked;
  auto key = std::make_pair(model_path, prompt);
  if (asked[key] < n) {
    cache[key] = PlainGreedy(model_path, prompt, n, eos);
    asked[key] = n;
  }
  const std::vector<TokenId>& all = cache[key];
  return std::vector<TokenId>(all.begin(), all.begin() + std::min<size_t>(n, all.size()));
}

struct ClusterOptions {
  bool draft = true;
  // The coordinator is told about the draft, but the draft process is only
  // started by Cluster::StartDraft() (a draft that comes up late).
  bool draft_started_later = false;
  std::vector<std::string> target_args{}, draft_args{}, coordinator_args{};
};

// The three processes on loopback, each with its own gRPC and metrics port.
class Cluster {
 public:
  explicit Cluster(const ClusterOptions& o = {}) {
    // A server that cannot bind a port it was given (taken by something else
    // between FreePort and its bind) exits at once: start over on fresh ports.
    for (int attempt = 0; attempt < 3 && !ready; ++attempt) {
      if (attempt > 0) {
        std::fprintf(stderr, "e2e: cluster did not start (attempt %d), retrying on new ports:\n%s\n", attempt,
                     Logs().c_str());
        coordinator.reset();
        draft.reset();
        target.reset();
      }
      Start(o);
    }
  }

  // One attempt: three processes on fresh ports; sets `ready`.
  void Start(const ClusterOptions& o) {
    // Unique per cluster: ctest may run test cases in parallel.
    dir_ = ::testing::TempDir() + "specserve-e2e-" + std::to_string(getpid()) + "-" + std::to_string(FreePort());
    mkdir(dir_.c_str(), 0755);
    const std::string& dir = dir_;
    target_port = FreePort();
    target_metrics = FreePort();
    // One thread per service unless a test says otherwise: ctest runs
    // clusters side by side, and the default (--threads auto, every core)
    // would put several spinning pools on the same cores.
    std::vector<std::string> targs = {"--model", testing::BundledModel("code-target-7m.gguf"), "--listen",
                                      Loopback(target_port), "--metrics-port", std::to_string(target_metrics),
                                      "--threads", "1"};
    targs.insert(targs.end(), o.target_args.begin(), o.target_args.end());
    target = std::make_unique<Process>("specserve-target", targs, dir + "/target.log");
    std::vector<std::string> cargs = {"--target", Loopback(target_port)};
    if (o.draft) {
      draft_port = FreePort();
      draft_metrics = FreePort();
      std::vector<std::string> dargs = {"--model", testing::BundledModel("code-draft-1m.gguf"), "--listen",
                                        Loopback(draft_port), "--metrics-port", std::to_string(draft_metrics),
                                        "--threads", "1"};
      dargs.insert(dargs.end(), o.draft_args.begin(), o.draft_args.end());
      draft_argv_ = dargs;
      if (!o.draft_started_later) draft = std::make_unique<Process>("specserve-draft", dargs, dir + "/draft.log");
      cargs.insert(cargs.end(), {"--draft", Loopback(draft_port)});
    }
    coordinator_port = FreePort();
    coordinator_metrics = FreePort();
    cargs.insert(cargs.end(), {"--listen", Loopback(coordinator_port), "--metrics-port",
                               std::to_string(coordinator_metrics)});
    cargs.insert(cargs.end(), o.coordinator_args.begin(), o.coordinator_args.end());
    // The draft first, so the coordinator's start-up check finds it.
    if (draft) ready = WaitServing(Loopback(draft_port));
    coordinator = std::make_unique<Process>("specserve-coordinator", cargs, dir + "/coordinator.log");
    ready = (!draft || ready || o.draft_started_later) && WaitServing(Loopback(target_port)) && WaitServing(Loopback(coordinator_port));
    stub = v1::Generation::NewStub(grpc::CreateChannel(Loopback(coordinator_port), grpc::InsecureChannelCredentials()));
  }

  // With draft_started_later: starts the draft now; true once it is SERVING.
  bool StartDraft() {
    draft = std::make_unique<Process>("specserve-draft", draft_argv_, dir_ + "/draft.log");
    return WaitServing(Loopback(draft_port));
  }

  // Stops the processes; keeps their logs only when the test failed.
  ~Cluster() {
    coordinator.reset();
    draft.reset();
    target.reset();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string Logs() const {
    std::string s;
    if (target) s += target->LogTail();
    if (coordinator) s += coordinator->LogTail();
    if (draft) s += draft->LogTail();
    return s;
  }

  int target_port = 0, target_metrics = 0, draft_port = 0, draft_metrics = 0;
  int coordinator_port = 0, coordinator_metrics = 0;
  std::unique_ptr<Process> target, draft, coordinator;
  std::unique_ptr<v1::Generation::Stub> stub;
  bool ready = false;

 private:
  std::string dir_;
  std::vector<std::string> draft_argv_;
};

// A finished streaming call: deltas concatenated, the final message, the status.
struct StreamResult {
  std::vector<TokenId> ids;
  std::string text;
  int deltas = 0;
  bool final_seen = false;
  bool final_last = true;  // nothing came after the final message
  v1::Final final;
  grpc::Status status;
};

inline StreamResult Generate(v1::Generation::Stub& stub, const v1::GenerateRequest& req,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  StreamResult r;
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (r.final_seen) r.final_last = false;
    if (msg.has_delta()) {
      ++r.deltas;
      r.ids.insert(r.ids.end(), msg.delta().token_ids().begin(), msg.delta().token_ids().end());
      r.text += msg.delta().text();
    } else if (msg.has_final()) {
      r.final_seen = true;
      r.final = msg.final();
    }
  }
  r.status = reader->Finish();
  return r;
}

}  // namespace specserve::e2e
