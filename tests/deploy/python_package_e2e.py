"""The installed `specserve` package against a running coordinator (run by
python_package_test.sh): sync generate and stream, the asyncio client's
generate and stream, model_info, health, request ids, and errors as the
package's exception classes (bad arguments, a closed port, a deadline, a
cancelled stream).

    python python_package_e2e.py COORDINATOR_ADDR CLOSED_ADDR
"""

import asyncio
import sys

import specserve
from specserve import AsyncClient, Client, Delta, GenerationResult, Stats

TARGET, CLOSED = sys.argv[1], sys.argv[2]
PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
GREEDY = dict(max_tokens=48, k=4, timeout=120)


def check_result(r: GenerationResult, drafter: str) -> None:
    assert isinstance(r, GenerationResult) and isinstance(r.stats, Stats), r
    assert r.text.strip(), "no text"
    assert r.finish_reason in ("stop", "length"), r.finish_reason
    assert len(r.token_ids) == r.stats.tokens > 0, (len(r.token_ids), r.stats.tokens)
    assert r.stats.drafter == drafter, r.stats
    assert r.stats.rounds > 0 and r.stats.prompt_tokens > 0, r.stats
    if drafter != "none":
        assert r.stats.drafted > 0 and 0 <= r.stats.accepted <= r.stats.drafted, r.stats


def expect_error(cls, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except cls as e:
        assert isinstance(e, specserve.SpecserveError), type(e)
        return e
    raise AssertionError("%s did not raise %s" % (fn, cls.__name__))


def sync_checks() -> GenerationResult:
    with Client(TARGET) as c:
        assert c.health() == "SERVING"
        info = c.model_info()
        assert isinstance(info, specserve.ModelInfo), info
        assert info.target_model and info.draft_model and info.vocab_size == 4096, info

        # GenerateUnary, with our request id echoed back.
        unary = c.generate(PROMPT, drafter="model", request_id="py-e2e-1", **GREEDY)
        check_result(unary, "model")
        assert unary.request_id == "py-e2e-1", unary.request_id

        # The stream: Deltas whose concatenation is the unary answer.
        with c.stream(PROMPT, drafter="model", **GREEDY) as stream:
            deltas = list(stream)
        assert deltas and all(isinstance(d, Delta) for d in deltas), deltas
        streamed = stream.result
        assert streamed is not None
        check_result(streamed, "model")
        assert "".join(d.text for d in deltas) == streamed.text == unary.text, (streamed.text, unary.text)
        assert [t for d in deltas for t in d.token_ids] == streamed.token_ids == unary.token_ids
        assert streamed.request_id, "no request id generated"

        # Greedy speculative output is plain greedy decoding.
        plain = c.stream(PROMPT, drafter="none", **GREEDY).get_result()
        check_result(plain, "none")
        assert plain.token_ids == unary.token_ids and plain.stats.drafted == 0, plain

        # Logprobs: plain result classes, one per token, the same with and
        # without speculation, and the greedy token on top.
        lp = c.generate(PROMPT, drafter="model", logprobs=True, top_logprobs=3, **GREEDY)
        assert lp.token_ids == unary.token_ids and not unary.logprobs, lp
        assert len(lp.logprobs) == len(lp.token_ids), (len(lp.logprobs), len(lp.token_ids))
        with c.stream(PROMPT, drafter="none", logprobs=True, top_logprobs=3, **GREEDY) as stream:
            plain_deltas = list(stream)
        assert all(len(d.logprobs) == len(d.token_ids) for d in plain_deltas)
        plain_lp = stream.result.logprobs
        for t, ref, tid in zip(lp.logprobs, plain_lp, lp.token_ids):
            assert isinstance(t, specserve.TokenLogprob) and isinstance(t.top_logprobs[0], specserve.TopLogprob), t
            assert t.token_id == ref.token_id == tid == t.top_logprobs[0].token_id, (t, ref, tid)
            assert abs(t.logprob - ref.logprob) <= 1e-4 and t.logprob <= 0, (t, ref)
            assert len(t.top_logprobs) == 3, t

        # Errors: a bad argument, on every path; a deadline; a closed port.
        for fn in (lambda: c.generate(PROMPT, k=99, timeout=60),
                   lambda: list(c.stream(PROMPT, k=99, timeout=60)),
                   lambda: c.generate("", timeout=60),
                   lambda: c.generate(PROMPT, logprobs=True, top_logprobs=21, timeout=60)):
            e = expect_error(specserve.InvalidArgumentError, fn)
            assert e.code.name == "INVALID_ARGUMENT" and not e.retryable and e.details, (e.code, e.details)
        try:
            c.generate(PROMPT, drafter="nonsense")
            raise AssertionError("drafter='nonsense' was accepted")
        except ValueError:
            pass
    with Client(CLOSED) as closed:
        e = expect_error(specserve.UnavailableError, closed.health, timeout=2)
        assert e.retryable
    print("sync: %d tokens, acceptance %.2f, request id %s" %
          (unary.stats.tokens, unary.stats.acceptance_rate, streamed.request_id))
    return unary


async def async_checks(want: GenerationResult) -> None:
    async with AsyncClient(TARGET) as c:
        assert await c.health() == "SERVING"
        info = await c.model_info()
        assert info.draft_model and info.vocab_size == 4096, info

        # Three requests at once, unary and streamed: all plain greedy.
        async def streamed() -> GenerationResult:
            deltas = []
            async with c.stream(PROMPT, drafter="model", request_id="py-e2e-aio", **GREEDY) as s:
                async for d in s:
                    assert isinstance(d, Delta), d
                    deltas.append(d)
            assert s.result is not None and "".join(d.text for d in deltas) == s.result.text
            assert s.result.request_id == "py-e2e-aio", s.result.request_id
            return s.result

        results = await asyncio.gather(c.generate(PROMPT, drafter="model", **GREEDY),
                                       c.generate(PROMPT, drafter="ngram", **GREEDY), streamed())
        for r, drafter in zip(results, ("model", "ngram", "model")):
            check_result(r, drafter)
            assert r.token_ids == want.token_ids and r.text == want.text, (drafter, r.text, want.text)

        for make in (lambda: c.generate(PROMPT, k=99, timeout=60),
                     lambda: c.stream(PROMPT, k=99, timeout=60).get_result()):
            try:
                await make()
                raise AssertionError("k=99 was accepted")
            except specserve.InvalidArgumentError as e:
                assert e.code.name == "INVALID_ARGUMENT", e.code
    async with AsyncClient(CLOSED) as closed:
        try:
            await closed.health(timeout=2)
            raise AssertionError("a closed port answered")
        except specserve.UnavailableError:
            pass
    print("asyncio: generate x2 and stream concurrently == sync greedy text")


def interrupted_calls() -> None:
    """Last: a call cut short may cost the coordinator its draft for a while
    (it falls back to n-gram), which the checks above would see."""
    with Client(TARGET) as c:
        e = expect_error(specserve.DeadlineExceededError, c.generate, PROMPT, max_tokens=48, timeout=0.001)
        assert isinstance(e, TimeoutError)
        stream = c.stream(PROMPT, max_tokens=48, k=1, drafter="none", timeout=120)
        next(stream)
        stream.cancel()
        expect_error(specserve.RequestCancelledError, list, stream)
    print("deadline and cancellation: DeadlineExceededError, RequestCancelledError")


if __name__ == "__main__":
    result = sync_checks()
    asyncio.run(async_checks(result))
    interrupted_calls()
    print("python package e2e passed")
