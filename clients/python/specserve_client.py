#!/usr/bin/env python3
"""The specserve command line from a checkout, and the older proto-level
client for scripts that import it (bench/soak.py, deploy/check/).

    python3 clients/python/specserve_client.py generate --target localhost:50051 \
        --prompt 'def add(a, b):' --max-tokens 64 --stats
    python3 clients/python/specserve_client.py info --target localhost:50051
    python3 clients/python/specserve_client.py health --target localhost:50051 --wait 30

It uses the installed `specserve` package (pip install clients/python, see
README.md) where there is one; otherwise it builds the package from src/ into
a temporary folder (removed at exit), generating the gRPC modules with
build_protos.py, as the package's build does. New code should use the
package itself: `import specserve; specserve.Client(target)`.
"""

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Iterable, Optional, Sequence, Tuple, Union

_HERE = os.path.dirname(os.path.abspath(__file__))


def _purge() -> None:
    for name in [m for m in sys.modules if m == "specserve" or m.startswith("specserve.")]:
        del sys.modules[name]


def _build_into_temp() -> str:
    """Copies src/specserve into a temporary folder, generates its gRPC
    modules there and puts the folder first on sys.path."""
    spec = importlib.util.spec_from_file_location("specserve_build_protos", os.path.join(_HERE, "build_protos.py"))
    assert spec is not None and spec.loader is not None
    build_protos = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_protos)
    tmp = tempfile.mkdtemp(prefix="specserve-client-")
    atexit.register(shutil.rmtree, tmp, True)
    shutil.copytree(os.path.join(_HERE, "src", "specserve"), os.path.join(tmp, "specserve"),
                    ignore=shutil.ignore_patterns("__pycache__", "v1", "_grpc_health"))
    build_protos.generate(tmp)
    sys.path.insert(0, tmp)
    return tmp


try:
    import specserve._common  # noqa: F401  (installed and built)
except ImportError:
    _purge()
    _build_into_temp()

import grpc  # noqa: E402

import specserve  # noqa: E402
from specserve import _common  # noqa: E402
from specserve.cli import main as _cli_main  # noqa: E402

channel_credentials = specserve.tls_credentials


def protos() -> Tuple[Any, Any]:
    """(generation_pb2, health_pb2): the generated message modules."""
    return _common.generation_pb2, _common.health_modules()[0]


class SpecserveClient:
    """The proto-level client: generate() yields GenerateResponse messages
    and failed calls raise grpc.RpcError. specserve.Client returns plain
    result classes instead."""

    def __init__(self, target: str, credentials: Optional[grpc.ChannelCredentials] = None,
                 server_name: Optional[str] = None, round_robin: bool = True):
        options = _common.channel_options(round_robin, server_name)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._gen = _common.generation_pb2
        self._stub = _common.generation_pb2_grpc.GenerationStub(self._channel)
        self._health_pb2, health_grpc = _common.health_modules()
        self._health = health_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "SpecserveClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def messages(self) -> Any:
        """The generated specserve.v1 module (GenerateRequest, Drafter, ...)."""
        return self._gen

    def request(self, prompt: Union[str, Sequence[int]], max_tokens: Optional[int] = None,
                stop: Iterable[str] = (), temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0,
                seed: int = 0, drafter: str = "unspecified", k: Optional[int] = None,
                adaptive_k: bool = False) -> Any:
        return _common.build_request(prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                     top_k=top_k, top_p=top_p, seed=seed, drafter=drafter,
                                     k=None if adaptive_k else k, adaptive_k=adaptive_k)

    def generate(self, prompt: Union[str, Sequence[int]], timeout: Optional[float] = None, **kw: Any) -> Any:
        """The Generate call: iterate it for GenerateResponse events (Deltas,
        then one Final); .cancel() cancels it."""
        return self._stub.Generate(self.request(prompt, **kw), timeout=timeout)

    def generate_unary(self, prompt: Union[str, Sequence[int]], timeout: Optional[float] = None, **kw: Any) -> Any:
        return self._stub.GenerateUnary(self.request(prompt, **kw), timeout=timeout)

    def model_info(self, timeout: Optional[float] = 10) -> Any:
        return self._stub.GetModelInfo(self._gen.GetModelInfoRequest(), timeout=timeout)

    def health(self, service: str = "", timeout: Optional[float] = 2) -> str:
        """The serving status name: SERVING, NOT_SERVING, ..."""
        resp = self._health.Check(self._health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        return self._health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def wait_ready(self, seconds: float) -> None:
        """Waits until the server answers SERVING. Raises TimeoutError."""
        give_up = time.monotonic() + seconds
        last = "no answer"
        while True:
            try:
                status = self.health(timeout=max(0.1, min(2.0, give_up - time.monotonic())))
                if status == "SERVING":
                    return
                last = status
            except grpc.RpcError as e:
                last = "%s: %s" % (e.code().name, e.details())
            if time.monotonic() >= give_up:
                raise TimeoutError("not ready after %.0f s (%s)" % (seconds, last))
            time.sleep(0.2)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return _cli_main(list(argv) if argv is not None else None, prog="specserve_client")


if __name__ == "__main__":
    sys.exit(main())
