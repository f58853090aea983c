"""Plain result classes: what the client returns, with no protobuf in sight."""

from dataclasses import dataclass, field, fields
from typing import Any, List, Optional


@dataclass(frozen=True)
class TopLogprob:
    """One of the most likely tokens at a position."""

    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's natural-log probability under the target model
    (its raw distribution, before temperature, top-k and top-p) and the
    `top_logprobs` most likely tokens at its position, most likely first."""

    token_id: int
    logprob: float
    top_logprobs: List[TopLogprob] = field(default_factory=list)

    @classmethod
    def from_proto(cls, pb: Any) -> "TokenLogprob":
        return cls(token_id=pb.token_id, logprob=pb.logprob,
                   top_logprobs=[TopLogprob(token_id=t.token_id, logprob=t.logprob) for t in pb.top_logprobs])


def logprobs_of(pb: Any) -> List[TokenLogprob]:
    """The TokenLogprob list of a Delta or GenerateUnaryResponse message
    (empty when not asked for, or from a coordinator without logprobs)."""
    return [TokenLogprob.from_proto(t) for t in getattr(pb, "logprobs", ())]


@dataclass(frozen=True)
class Delta:
    """Tokens committed by one round. `text` is the newly decoded text that is
    safe to show: an unfinished UTF-8 character or a tail that may start a
    stop string is held back until resolved, so text can lag token_ids.
    `logprobs`: with logprobs=True, one per token id."""

    text: str
    token_ids: List[int]
    logprobs: List[TokenLogprob] = field(default_factory=list)


@dataclass(frozen=True)
class Stats:
    """One generation's statistics (specserve.v1.GenerationStats)."""

    tokens: int = 0  # tokens returned
    rounds: int = 0  # target passes
    drafted: int = 0  # draft tokens verified
    accepted: int = 0  # of those, accepted
    acceptance_rate: float = 0.0  # accepted / drafted (0 when nothing was drafted)
    time_to_first_token_seconds: float = 0.0
    total_seconds: float = 0.0
    tokens_per_second: float = 0.0
    drafter: str = ""  # "model", "ngram", "none" as finally used
    fallbacks: int = 0  # drafter failures survived by falling back
    last_k: int = 0
    ahead_hits: int = 0  # rounds whose block was drafted during the previous verify
    draft_seconds: float = 0.0  # time the draft service reports, summed over rounds
    verify_seconds: float = 0.0  # time the target service reports
    network_seconds: float = 0.0  # the rest of those calls' wall time
    prompt_tokens: int = 0  # the prompt's length in tokens, BOS included

    @classmethod
    def from_proto(cls, pb: Any) -> "Stats":
        # Fields this class has and the compiled proto lacks keep their
        # defaults; fields only the proto has are left out.
        return cls(**{f.name: getattr(pb, f.name) for f in fields(cls) if hasattr(pb, f.name)})


@dataclass(frozen=True)
class GenerationResult:
    """A whole generation. finish_reason: "stop" (end-of-sequence token or
    stop string) or "length" (max_tokens)."""

    text: str
    token_ids: List[int]
    finish_reason: str
    stats: Stats
    request_id: Optional[str] = None  # the coordinator's x-request-id for this call
    logprobs: List[TokenLogprob] = field(default_factory=list)  # with logprobs=True: one per token id


@dataclass(frozen=True)
class ModelInfo:
    """What the coordinator serves (GetModelInfo)."""

    target_model: str = ""
    draft_model: str = ""  # empty without a usable draft service
    vocab_size: int = 0
    context_length: int = 0
    tokenizer: str = ""
    default_k: int = 0  # -1: adaptive

    @classmethod
    def from_proto(cls, pb: Any) -> "ModelInfo":
        return cls(**{f.name: getattr(pb, f.name) for f in fields(cls) if hasattr(pb, f.name)})


@dataclass
class _Accumulator:
    """Builds a GenerationResult from a stream's Delta and Final events."""

    text: List[str] = field(default_factory=list)
    token_ids: List[int] = field(default_factory=list)
    logprobs: List[TokenLogprob] = field(default_factory=list)
    result: Optional[GenerationResult] = None

    def delta(self, pb: Any) -> Delta:
        d = Delta(text=pb.text, token_ids=list(pb.token_ids), logprobs=logprobs_of(pb))
        self.text.append(d.text)
        self.token_ids.extend(d.token_ids)
        self.logprobs.extend(d.logprobs)
        return d

    def final(self, pb: Any, request_id: Optional[str]) -> Optional[Delta]:
        """Records the result; returns a last Delta when the Final carries
        held-back text (where the proto has such a field)."""
        tail = getattr(pb, "text", "")
        if tail:
            self.text.append(tail)
        self.result = GenerationResult(text="".join(self.text), token_ids=self.token_ids,
                                       finish_reason=pb.finish_reason, stats=Stats.from_proto(pb.stats),
                                       request_id=request_id, logprobs=self.logprobs)
        return Delta(text=tail, token_ids=[]) if tail else None
