// specserve-draft: serves the draft model's proposals over gRPC
// (specserve.v1.DraftService), with health, reflection and /metrics.
#include "draft_service/draft_server.h"
#include "rpc/service_main.h"

int main(int argc, char** argv) {
  return specserve::rpc::ServeModel<specserve::DraftServer>(
      argc, argv,
      {"specserve-draft",
       "usage: specserve-draft --model DRAFT.gguf [--listen HOST:PORT] [flags]\n"
       "Serves draft proposal sessions for the speculative decoding coordinator.",
       "draft", "0.0.0.0:50053", 9103});
}
