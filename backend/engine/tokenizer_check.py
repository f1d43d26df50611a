"""Whether a vLLM server tokenizes a prompt as this machine's tokenizer does.

A server engine renders prompts here (its chat template from a local copy of the model's
tokenizer files) and sends text; if the server's tokenizer is another one, every prompt reaches
the model as other tokens. ``RemoteEngine`` refuses such a server at connect time, and a compare
turn will not give a parity verdict on prompts the two sides tokenized differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where ``a`` and ``b`` differ (a length difference counts); None if equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class TokenizerDivergence:
    served: int
    """tokens the server made of the prompt"""
    local: int
    """tokens this machine's tokenizer made of it"""
    index: int
    """the first position where they differ"""


async def tokenizer_divergence(engine: object, prompt: str) -> TokenizerDivergence | None:
    """How the server's ``/tokenize`` of ``prompt`` differs from the local tokenizer's; None when
    they agree, or where the engine is in process or the server does not say."""
    ask = getattr(engine, "server_prompt_token_ids", None)
    local = getattr(engine, "prompt_token_ids", None)
    if ask is None or local is None:
        return None
    served: list[int] | None = await ask(prompt)
    if served is None:
        return None
    mine: list[int] = local(prompt)
    index = first_divergence(served, mine)
    return None if index is None else TokenizerDivergence(len(served), len(mine), index)
