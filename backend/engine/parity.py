"""Token parity between two engine paths: identical, or where and how they first differ."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backend.engine.protocol import Engine, EngineRequest, Finished, TurnEvent
from backend.engine.tokenizer_check import first_divergence, tokenizer_divergence

SAME_PATHS = "optimized = baseline on this machine: nothing applies"
"""Said where both paths got identical engine arguments and environment: nothing to compare."""


@dataclass(frozen=True)
class TokenParity:
    length_a: int
    length_b: int
    index: int | None
    token_a: int | None = None
    token_b: int | None = None
    text_a: str | None = None
    text_b: str | None = None

    @property
    def identical(self) -> bool:
        return self.index is None

    @property
    def matching_prefix(self) -> int:
        return self.length_a if self.index is None else self.index

    def describe(self) -> str:
        if self.index is None:
            return f"identical ({self.length_a} tokens)"
        return f"diverges at token {self.index}: {self.text_a!r} vs {self.text_b!r}"


def compare_tokens(
    a: Sequence[int], b: Sequence[int], decode: Callable[[int], str] | None = None
) -> TokenParity:
    index = first_divergence(a, b)
    if index is None:
        return TokenParity(len(a), len(b), None)
    token_a = a[index] if index < len(a) else None
    token_b = b[index] if index < len(b) else None
    show = decode or str
    return TokenParity(
        len(a),
        len(b),
        index,
        token_a,
        token_b,
        "<end>" if token_a is None else show(token_a),
        "<end>" if token_b is None else show(token_b),
    )


@dataclass(frozen=True)
class ParityReport:
    results: tuple[tuple[str, TokenParity], ...]

    @property
    def identical_requests(self) -> int:
        return sum(result.identical for _, result in self.results)

    @property
    def request_fraction(self) -> float:
        return self.identical_requests / len(self.results) if self.results else 1.0

    @property
    def position_fraction(self) -> float:
        """Token positions identical (matching prefixes) over all positions compared."""
        total = sum(max(r.length_a, r.length_b) for _, r in self.results)
        return sum(r.matching_prefix for _, r in self.results) / total if total else 1.0

    def summary(self) -> str:
        return (
            f"{self.identical_requests}/{len(self.results)} requests identical "
            f"({self.request_fraction:.0%}), {self.position_fraction:.1%} of token positions"
        )


async def _final_tokens(engine: Engine, request: EngineRequest) -> tuple[int, ...]:
    last: TurnEvent | None = None
    async for event in engine.stream(request):
        last = event
    if not isinstance(last, Finished):
        raise RuntimeError(f"request {request.request_id} did not finish: {last}")
    return last.token_ids


async def run_parity(
    engine_a: Engine,
    engine_b: Engine,
    requests: Sequence[EngineRequest],
    decode: Callable[[int], str] | None = None,
) -> ParityReport:
    """Run each (greedy) request on both engines at once and compare the tokens."""
    results = []
    for request in requests:
        tokens_a, tokens_b = await asyncio.gather(
            _final_tokens(engine_a, _tagged(request, "a-")), _final_tokens(engine_b, _tagged(request, "b-"))
        )
        results.append((request.request_id, compare_tokens(tokens_a, tokens_b, decode)))
    return ParityReport(tuple(results))


def _tagged(request: EngineRequest, tag: str) -> EngineRequest:
    from dataclasses import replace

    return replace(request, request_id=f"{tag}{request.request_id}")


async def tokenization_difference(engine: object, prompt: str) -> str | None:
    """Why a server's tokens could not be compared with this machine's: its ``/tokenize`` of the
    prompt differs from the local tokenizer's (None when they agree, or where the engine is in
    process or the server does not say)."""
    divergence = await tokenizer_divergence(engine, prompt)
    if divergence is None:
        return None
    return (
        f"The server at {getattr(engine, 'url', '?')} tokenizes the prompt differently from this "
        f"machine's tokenizer ({divergence.served} vs {divergence.local} tokens, first difference at "
        f"token {divergence.index}): a parity verdict would compare different prompts. Point --model "
        "at the served model's own tokenizer files."
    )
