"""specserve: a Python client for specserve's public API (specserve.v1.Generation).

    import specserve

    with specserve.Client("localhost:50051") as client:
        result = client.generate("def add(a, b):", max_tokens=64, k=4)
        print(result.text, result.stats.acceptance_rate)

Client is synchronous, AsyncClient its asyncio twin; results are plain
dataclasses (GenerationResult, Stats, Delta, TokenLogprob, ModelInfo); failed calls raise
SpecserveError subclasses. The gRPC modules (specserve.v1.generation_pb2 and
_grpc) are generated when the package is built. See clients/python/README.md.
"""

from specserve._common import tls_credentials
from specserve.aio import AsyncClient, AsyncGenerationStream
from specserve.client import Client, GenerationStream
from specserve.errors import (DeadlineExceededError, FailedPreconditionError, InvalidArgumentError,
                              RequestCancelledError, ResourceExhaustedError, SpecserveError, UnavailableError)
from specserve.types import Delta, GenerationResult, ModelInfo, Stats, TokenLogprob, TopLogprob

try:
    from importlib.metadata import PackageNotFoundError, version as _version

    __version__ = _version("specserve")
except PackageNotFoundError:  # run from a build folder, not installed
    __version__ = "0+unknown"

__all__ = [
    "AsyncClient", "AsyncGenerationStream", "Client", "DeadlineExceededError", "Delta",
    "FailedPreconditionError", "GenerationResult", "GenerationStream", "InvalidArgumentError", "ModelInfo",
    "RequestCancelledError", "ResourceExhaustedError", "SpecserveError", "Stats", "TokenLogprob", "TopLogprob",
    "UnavailableError",
    "tls_credentials",
]
