// `specserve client`: one request to a running coordinator. The text streams
// to stdout as rounds commit it; the request's statistics go to stderr.
#include <cstdio>
#include <string>

#include "common/cli_args.h"
#include "common/status_macros.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/coordinator_client.h"

namespace specserve::cli {
namespace {

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(v1::GenerateRequest req, RequestFromFlags(args));
  ASSIGN_OR_RETURN(double timeout_s, args.Double("timeout", 0.001, 86400));
  const std::string prompt = PromptFromFlags(args);
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
  AddPromptFlag(args);
  args.Flag("timeout", "120", "deadline of the request, seconds");
  AddRequestFlags(args);
  return RunCommand(args, argc, argv, "client", Run, {.blank_line_after_help = false});
}

}  // namespace specserve::cli
