// `specserve client`: one request to a running coordinator. The text streams
// to stdout as rounds commit it; the request's statistics go to stderr.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "common/cli_args.h"
#include "common/status_macros.h"
#include "tools/commands.h"
#include "tools/coordinator_client.h"

namespace specserve::cli {
namespace {

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(v1::GenerateRequest req, RequestFromFlags(args));
  ASSIGN_OR_RETURN(double timeout_s, args.Double("timeout", 0.001, 86400));
  std::string prompt = args.Str("prompt");
  if (!args.Given("prompt")) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  req.set_text(prompt);
  auto stub = ConnectCoordinator(args.Str("coordinator"));
  std::fputs(prompt.c_str(), stdout);
  ASSIGN_OR_RETURN(Streamed s, GenerateStreaming(*stub, req, timeout_s, [](const v1::Delta& d) {
                     std::fputs(d.text().c_str(), stdout);
                     std::fflush(stdout);
                   }));
  std::fputs("\n", stdout);
  std::fprintf(stderr, "\n[finish: %s] %s\n", s.final.finish_reason().c_str(), FormatStats(s.final.stats()).c_str());
  return absl::OkStatus();
}

}  // namespace

int Client(int argc, char** argv) {
  CliArgs args("usage: specserve client --coordinator HOST:PORT [--prompt TEXT | < prompt.txt] [flags]");
  args.Flag("coordinator", "127.0.0.1:50051", "the coordinator's public gRPC address");
  args.Flag("prompt", "", "prompt text (read from stdin when absent)");
  args.Flag("timeout", "120", "deadline of the request, seconds");
  AddRequestFlags(args);
  if (auto s = args.Parse(argc, argv, 2); !s.ok()) {
    std::fprintf(stderr, "specserve client: %s\n", s.ToString().c_str());
    return 2;
  }
  if (args.help()) {
    std::fputs(args.HelpText().c_str(), stdout);
    return 0;
  }
  if (absl::Status s = Run(args); !s.ok()) {
    std::fprintf(stderr, "specserve client: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace specserve::cli
