"""What the sync and asyncio clients share: the generated modules, channel
options, TLS credentials and request building."""

import json
import re
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import grpc

try:
    from specserve.v1 import generation_pb2, generation_pb2_grpc
except ImportError as e:  # a source checkout that was never built
    raise ImportError("specserve's generated gRPC modules are missing: install the package "
                      "(pip install --no-build-isolation clients/python) or run "
                      "clients/python/specserve_client.py, which builds them") from e

Prompt = Union[str, Sequence[int]]
Metadata = Sequence[Tuple[str, str]]

DRAFTERS = {"unspecified": generation_pb2.DRAFTER_UNSPECIFIED, "model": generation_pb2.DRAFTER_MODEL,
            "ngram": generation_pb2.DRAFTER_NGRAM, "none": generation_pb2.DRAFTER_NONE}
REQUEST_ID_KEY = "x-request-id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def health_modules() -> Tuple[Any, Any]:
    """(health_pb2, health_pb2_grpc) for grpc.health.v1: grpcio-health-checking's
    where it is installed (two copies of grpc.health.v1 in protobuf's default
    pool would collide), else the package's own."""
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import]
    except ImportError:
        from specserve._grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[no-redef]
    return health_pb2, health_pb2_grpc


def tls_credentials(ca: Optional[str] = None, cert: Optional[str] = None,
                    key: Optional[str] = None) -> Optional[grpc.ChannelCredentials]:
    """TLS credentials from PEM files (CA to verify the server; a client
    certificate and key for mutual TLS); None (plaintext) when none is given."""
    if not (ca or cert or key):
        return None
    if bool(cert) != bool(key):
        raise ValueError("a client certificate and its key go together")

    def read(path: Optional[str]) -> Optional[bytes]:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=read(key),
                                        certificate_chain=read(cert))


def channel_options(round_robin: bool, server_name: Optional[str]) -> List[Tuple[str, Any]]:
    """Options for a channel to the coordinator. round_robin spreads calls over
    every address a dns:/// target resolves to (deploy/README.md, "Load balancing")."""
    options: List[Tuple[str, Any]] = [("grpc.max_receive_message_length", 64 << 20)]
    if round_robin:
        options.append(("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})))
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return options


def build_request(prompt: Prompt, max_tokens: Optional[int] = None, stop: Iterable[str] = (),
                  temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0, seed: int = 0,
                  drafter: str = "unspecified", k: Optional[int] = None, adaptive_k: bool = False,
                  stop_token_ids: Iterable[int] = (), logprobs: bool = False, top_logprobs: int = 0) -> Any:
    """A specserve.v1.GenerateRequest. `prompt` is text or a list of token ids;
    `logprobs` asks for each token's logprob and `top_logprobs` (0..20) alternatives."""
    if drafter not in DRAFTERS:
        raise ValueError("drafter %r: want one of %s" % (drafter, ", ".join(sorted(DRAFTERS))))
    if adaptive_k and k is not None:
        raise ValueError("k and adaptive_k exclude each other")
    req = generation_pb2.GenerateRequest(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                                         drafter=DRAFTERS[drafter])
    if isinstance(prompt, str):
        req.text = prompt
    else:
        req.token_ids.ids.extend(prompt)
    if max_tokens is not None:
        req.max_tokens = max_tokens
    req.stop.extend(stop)
    req.stop_token_ids.extend(stop_token_ids)
    if logprobs or top_logprobs:
        req.logprobs = logprobs
        req.top_logprobs = top_logprobs
    if adaptive_k:
        req.adaptive_k = True
    elif k is not None:
        req.k = k
    return req


def call_metadata(request_id: Optional[str]) -> Optional[Metadata]:
    if request_id is None:
        return None
    if not _REQUEST_ID.match(request_id):
        raise ValueError("request_id %r: want 1-128 characters of [A-Za-z0-9._:-]" % request_id)
    return ((REQUEST_ID_KEY, request_id),)


def request_id_of(metadata: Optional[Iterable[Any]]) -> Optional[str]:
    """The x-request-id in a call's initial metadata, if any."""
    for item in metadata or ():
        key, value = item[0], item[1]
        if key == REQUEST_ID_KEY:
            return value.decode() if isinstance(value, bytes) else value
    return None
