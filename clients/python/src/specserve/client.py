"""The synchronous client."""

import time
from typing import Any, Iterable, Iterator, Optional, Sequence, Tuple

import grpc

from specserve import _common
from specserve._common import Prompt
from specserve.errors import DeadlineExceededError, SpecserveError, from_rpc_error
from specserve.types import Delta, GenerationResult, ModelInfo, Stats, _Accumulator, logprobs_of


class GenerationStream(Iterator[Delta]):
    """A streamed generation: iterate for Delta objects in commit order; once
    the stream has ended, `result` holds the whole GenerationResult (or call
    get_result(), which reads the rest first). Leaving a `with` block before
    the end cancels the call."""

    def __init__(self, call: Any):
        self._call = call
        self._acc = _Accumulator()
        self._done = False

    def __iter__(self) -> "GenerationStream":
        return self

    def __next__(self) -> Delta:
        while not self._done:
            try:
                ev = next(self._call)
            except StopIteration:
                self._done = True
                if self._acc.result is None:
                    raise SpecserveError("the stream ended without a Final message") from None
                break
            except grpc.RpcError as e:
                self._done = True
                raise from_rpc_error(e) from e
            kind = ev.WhichOneof("event")
            if kind == "delta":
                return self._acc.delta(ev.delta)
            if kind == "final":
                tail = self._acc.final(ev.final, _common.request_id_of(self._call.initial_metadata()))
                if tail is not None:
                    return tail
        raise StopIteration

    @property
    def result(self) -> Optional[GenerationResult]:
        """The whole generation once the Final message has arrived, else None."""
        return self._acc.result

    def get_result(self) -> GenerationResult:
        """Reads the rest of the stream and returns the whole generation."""
        for _ in self:
            pass
        assert self._acc.result is not None
        return self._acc.result

    @property
    def request_id(self) -> Optional[str]:
        """The coordinator's x-request-id (waits for the initial metadata)."""
        return _common.request_id_of(self._call.initial_metadata())

    def cancel(self) -> None:
        """Cancels the call; iterating further raises RequestCancelledError."""
        self._call.cancel()

    def __enter__(self) -> "GenerationStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._done:
            self.cancel()


class Client:
    """specserve.v1.Generation and grpc.health.v1.Health over one channel.

    `target` is a gRPC target: HOST:PORT, or dns:///NAME:PORT for a headless
    Kubernetes Service, whose ready pods the calls are spread over
    (round_robin). `credentials` (see tls_credentials) makes it TLS;
    `server_name` overrides the name expected in the server certificate.
    Failed calls raise SpecserveError subclasses (specserve.errors)."""

    def __init__(self, target: str = "localhost:50051", *, credentials: Optional[grpc.ChannelCredentials] = None,
                 server_name: Optional[str] = None, round_robin: bool = True,
                 options: Sequence[Tuple[str, Any]] = ()):
        opts = _common.channel_options(round_robin, server_name) + list(options)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=opts)
        self._stub = _common.generation_pb2_grpc.GenerationStub(self._channel)
        health_pb2, health_pb2_grpc = _common.health_modules()
        self._health_pb2 = health_pb2
        self._health = health_pb2_grpc.HealthStub(self._channel)

    @property
    def channel(self) -> grpc.Channel:
        return self._channel

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def generate(self, prompt: Prompt, *, max_tokens: Optional[int] = None, stop: Iterable[str] = (),
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0, seed: int = 0,
                 drafter: str = "unspecified", k: Optional[int] = None, adaptive_k: bool = False,
                 stop_token_ids: Iterable[int] = (), logprobs: bool = False, top_logprobs: int = 0,
                 timeout: Optional[float] = None,
                 request_id: Optional[str] = None) -> GenerationResult:
        """Generates in one call (GenerateUnary). `prompt`: text, or token ids
        used as given. temperature 0 is greedy; `drafter` is "model", "ngram",
        "none" or "unspecified" (the coordinator's choice); `k` tokens drafted
        per round (0..16) or `adaptive_k`; `logprobs`: each token's logprob
        under the target (result.logprobs) with `top_logprobs` (0..20)
        alternatives; `timeout` in seconds."""
        req = _common.build_request(prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                    top_k=top_k, top_p=top_p, seed=seed, drafter=drafter, k=k,
                                    adaptive_k=adaptive_k, stop_token_ids=stop_token_ids,
                                    logprobs=logprobs, top_logprobs=top_logprobs)
        try:
            resp, call = self._stub.GenerateUnary.with_call(req, timeout=timeout,
                                                            metadata=_common.call_metadata(request_id))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        return GenerationResult(text=resp.text, token_ids=list(resp.token_ids), finish_reason=resp.finish_reason,
                                stats=Stats.from_proto(resp.stats), logprobs=logprobs_of(resp),
                                request_id=_common.request_id_of(call.initial_metadata()))

    def stream(self, prompt: Prompt, *, max_tokens: Optional[int] = None, stop: Iterable[str] = (),
               temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0, seed: int = 0,
               drafter: str = "unspecified", k: Optional[int] = None, adaptive_k: bool = False,
               stop_token_ids: Iterable[int] = (), logprobs: bool = False, top_logprobs: int = 0,
               timeout: Optional[float] = None,
               request_id: Optional[str] = None) -> GenerationStream:
        """Streams the generation (Generate): a GenerationStream of Delta
        objects, each round's committed tokens as soon as they are committed.
        Arguments as for generate()."""
        req = _common.build_request(prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                    top_k=top_k, top_p=top_p, seed=seed, drafter=drafter, k=k,
                                    adaptive_k=adaptive_k, stop_token_ids=stop_token_ids,
                                    logprobs=logprobs, top_logprobs=top_logprobs)
        return GenerationStream(self._stub.Generate(req, timeout=timeout, metadata=_common.call_metadata(request_id)))

    def model_info(self, *, timeout: Optional[float] = 10) -> ModelInfo:
        """The served models (GetModelInfo)."""
        try:
            return ModelInfo.from_proto(self._stub.GetModelInfo(_common.generation_pb2.GetModelInfoRequest(),
                                                                timeout=timeout))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e

    def health(self, service: str = "", *, timeout: Optional[float] = 2) -> str:
        """The grpc.health.v1 status name: "SERVING", "NOT_SERVING", ..."""
        try:
            resp = self._health.Check(self._health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        return self._health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def wait_ready(self, seconds: float) -> None:
        """Waits until the server answers SERVING (the coordinator does once
        the target service has answered). Raises DeadlineExceededError (a
        TimeoutError) after `seconds`."""
        give_up = time.monotonic() + seconds
        last = "no answer"
        while True:
            try:
                status = self.health(timeout=max(0.1, min(2.0, give_up - time.monotonic())))
                if status == "SERVING":
                    return
                last = status
            except SpecserveError as e:
                last = str(e)
            if time.monotonic() >= give_up:
                raise DeadlineExceededError("not ready after %.0f s (%s)" % (seconds, last))
            time.sleep(0.2)
