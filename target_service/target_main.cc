// specserve-target: serves the target model's verify passes over gRPC
// (specserve.v1.TargetService), with health, reflection and /metrics.
#include "rpc/service_main.h"
#include "target_service/target_server.h"

int main(int argc, char** argv) {
  return specserve::rpc::ServeModel<specserve::TargetServer>(
      argc, argv,
      {"specserve-target",
       "usage: specserve-target --model TARGET.gguf [--listen HOST:PORT] [flags]\n"
       "Serves verification sessions for the speculative decoding coordinator.",
       "target", "0.0.0.0:50052", 9102});
}
