"""Errors: one class per gRPC status code a caller acts on differently
(docs/style.md, "Errors"); every other code is a plain SpecserveError."""

from typing import Dict, Optional, Type

import grpc


class SpecserveError(Exception):
    """A failed call. `code` is the grpc.StatusCode (None for a client-side
    failure, e.g. a stream that ended without its Final message) and
    `details` the server's message."""

    retryable = False  # whether the same request may succeed later

    def __init__(self, details: str, code: Optional[grpc.StatusCode] = None):
        super().__init__("%s: %s" % (code.name, details) if code is not None else details)
        self.code = code
        self.details = details


class InvalidArgumentError(SpecserveError):
    """Fix the request: empty prompt, k out of range, max_tokens past the
    context, bad sampling values, token ids outside the vocabulary."""


class FailedPreconditionError(SpecserveError):
    """Fix the protocol state."""


class ResourceExhaustedError(SpecserveError):
    """A limit is full (the coordinator's or a service's sessions): back off."""

    retryable = True


class UnavailableError(SpecserveError):
    """The server or the target service is gone or draining: retry."""

    retryable = True


class DeadlineExceededError(SpecserveError, TimeoutError):
    """The call's deadline (timeout=) passed."""


class RequestCancelledError(SpecserveError):
    """The call was cancelled (by this client or the server)."""


_BY_CODE: Dict[grpc.StatusCode, Type[SpecserveError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: RequestCancelledError,
}


def from_rpc_error(e: grpc.RpcError) -> SpecserveError:
    """The SpecserveError subclass for a grpc.RpcError (also grpc.aio's); raise it
    `from e` to keep the original."""
    code = e.code() if hasattr(e, "code") else None
    details = (e.details() if hasattr(e, "details") else None) or str(e)
    cls = _BY_CODE.get(code, SpecserveError) if code is not None else SpecserveError
    return cls(details, code if code is not None else grpc.StatusCode.UNKNOWN)
