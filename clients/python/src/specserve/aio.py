"""The asyncio client (grpc.aio): the same methods as Client, awaited."""

import asyncio
import time
from typing import Any, AsyncIterator, Iterable, Optional, Sequence, Tuple

import grpc
import grpc.aio

from specserve import _common
from specserve._common import Prompt
from specserve.errors import DeadlineExceededError, SpecserveError, from_rpc_error
from specserve.types import Delta, GenerationResult, ModelInfo, Stats, _Accumulator, logprobs_of


class AsyncGenerationStream(AsyncIterator[Delta]):
    """A streamed generation: `async for` yields Delta objects; once the
    stream has ended, `result` holds the GenerationResult (or await
    get_result(), which reads the rest first). Leaving an `async with` block
    before the end cancels the call."""

    def __init__(self, call: Any):
        self._call = call
        self._acc = _Accumulator()
        self._done = False

    def __aiter__(self) -> "AsyncGenerationStream":
        return self

    async def __anext__(self) -> Delta:
        while not self._done:
            try:
                ev = await self._call.read()
            except grpc.RpcError as e:
                self._done = True
                raise from_rpc_error(e) from e
            if ev is grpc.aio.EOF:
                self._done = True
                if self._acc.result is None:
                    raise SpecserveError("the stream ended without a Final message")
                break
            kind = ev.WhichOneof("event")
            if kind == "delta":
                return self._acc.delta(ev.delta)
            if kind == "final":
                tail = self._acc.final(ev.final, _common.request_id_of(await self._call.initial_metadata()))
                if tail is not None:
                    return tail
        raise StopAsyncIteration

    @property
    def result(self) -> Optional[GenerationResult]:
        """The whole generation once the Final message has arrived, else None."""
        return self._acc.result

    async def get_result(self) -> GenerationResult:
        """Reads the rest of the stream and returns the whole generation."""
        async for _ in self:
            pass
        assert self._acc.result is not None
        return self._acc.result

    async def request_id(self) -> Optional[str]:
        """The coordinator's x-request-id (waits for the initial metadata)."""
        return _common.request_id_of(await self._call.initial_metadata())

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncGenerationStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if not self._done:
            self.cancel()


class AsyncClient:
    """Client's asyncio twin over a grpc.aio channel; create it inside the
    running event loop and close it with `await close()` or `async with`."""

    def __init__(self, target: str = "localhost:50051", *, credentials: Optional[grpc.ChannelCredentials] = None,
                 server_name: Optional[str] = None, round_robin: bool = True,
                 options: Sequence[Tuple[str, Any]] = ()):
        opts = _common.channel_options(round_robin, server_name) + list(options)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=opts)
        self._stub = _common.generation_pb2_grpc.GenerationStub(self._channel)
        health_pb2, health_pb2_grpc = _common.health_modules()
        self._health_pb2 = health_pb2
        self._health = health_pb2_grpc.HealthStub(self._channel)

    @property
    def channel(self) -> grpc.aio.Channel:
        return self._channel

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def generate(self, prompt: Prompt, *, max_tokens: Optional[int] = None, stop: Iterable[str] = (),
                       temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0, seed: int = 0,
                       drafter: str = "unspecified", k: Optional[int] = None, adaptive_k: bool = False,
                       stop_token_ids: Iterable[int] = (), logprobs: bool = False, top_logprobs: int = 0,
                       timeout: Optional[float] = None,
                       request_id: Optional[str] = None) -> GenerationResult:
        """As Client.generate."""
        req = _common.build_request(prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                    top_k=top_k, top_p=top_p, seed=seed, drafter=drafter, k=k,
                                    adaptive_k=adaptive_k, stop_token_ids=stop_token_ids,
                                    logprobs=logprobs, top_logprobs=top_logprobs)
        call = self._stub.GenerateUnary(req, timeout=timeout, metadata=_common.call_metadata(request_id))
        try:
            resp = await call
            metadata = await call.initial_metadata()
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        return GenerationResult(text=resp.text, token_ids=list(resp.token_ids), finish_reason=resp.finish_reason,
                                stats=Stats.from_proto(resp.stats), logprobs=logprobs_of(resp),
                                request_id=_common.request_id_of(metadata))

    def stream(self, prompt: Prompt, *, max_tokens: Optional[int] = None, stop: Iterable[str] = (),
               temperature: float = 0.0, top_k: int = 0, top_p: float = 0.0, seed: int = 0,
               drafter: str = "unspecified", k: Optional[int] = None, adaptive_k: bool = False,
               stop_token_ids: Iterable[int] = (), logprobs: bool = False, top_logprobs: int = 0,
               timeout: Optional[float] = None,
               request_id: Optional[str] = None) -> AsyncGenerationStream:
        """As Client.stream; not a coroutine: `async for d in client.stream(...)`."""
        req = _common.build_request(prompt, max_tokens=max_tokens, stop=stop, temperature=temperature,
                                    top_k=top_k, top_p=top_p, seed=seed, drafter=drafter, k=k,
                                    adaptive_k=adaptive_k, stop_token_ids=stop_token_ids,
                                    logprobs=logprobs, top_logprobs=top_logprobs)
        return AsyncGenerationStream(self._stub.Generate(req, timeout=timeout,
                                                         metadata=_common.call_metadata(request_id)))

    async def model_info(self, *, timeout: Optional[float] = 10) -> ModelInfo:
        try:
            resp = await self._stub.GetModelInfo(_common.generation_pb2.GetModelInfoRequest(), timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        return ModelInfo.from_proto(resp)

    async def health(self, service: str = "", *, timeout: Optional[float] = 2) -> str:
        try:
            resp = await self._health.Check(self._health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        return self._health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    async def wait_ready(self, seconds: float) -> None:
        """As Client.wait_ready."""
        give_up = time.monotonic() + seconds
        last = "no answer"
        while True:
            try:
                status = await self.health(timeout=max(0.1, min(2.0, give_up - time.monotonic())))
                if status == "SERVING":
                    return
                last = status
            except SpecserveError as e:
                last = str(e)
            if time.monotonic() >= give_up:
                raise DeadlineExceededError("not ready after %.0f s (%s)" % (seconds, last))
            await asyncio.sleep(0.2)
