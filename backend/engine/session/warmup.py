"""One short request to a newly started engine, before its first timed turn.

A path's first requests after its engine starts are slow (lazily built kernels and buffers, the
first pass through each compiled shape): on a 2-core EPYC, the demo's first compare after a start
measured the baseline at 98.6 tok/s and the optimized path at 190.5 (1.93x) where interleaved
repetitions found the two within noise. So whoever starts an engine for a person to time — the
engine pool of the app, ``gemma-chat ask`` — sends it this request first. It is never shown and
never saved, and its figures go nowhere: the turn that follows is timed on a warm engine.
"""

from __future__ import annotations

import time
import uuid

from backend.engine.protocol import Engine, EngineRequest, Failed, SamplingSettings
from backend.errors import EngineStartFailed
from backend.gemma4.messages import ChatMessage

WARM_UP_PREFIX = "warm-up-"
"""Every warm-up request's id starts with this (a fake engine or a log can tell them apart)."""
WARM_UP_TOKENS = 16
"""Enough decode steps to run every draft length of a speculative path at least once."""
WARM_UP_PROMPT = "Say hello."


def warm_up_request(engine: Engine) -> EngineRequest:
    prompt = engine.render([ChatMessage("user", WARM_UP_PROMPT)], [])
    return EngineRequest(
        request_id=f"{WARM_UP_PREFIX}{uuid.uuid4().hex[:8]}",
        prompt=prompt.text,
        sampling=SamplingSettings(max_tokens=WARM_UP_TOKENS, ignore_eos=True),
    )


async def warm_up(engine: Engine) -> float:
    """Run the warm-up request to its end; its seconds. Raises EngineStartFailed if it fails."""
    began = time.monotonic()
    async for event in engine.stream(warm_up_request(engine)):
        if isinstance(event, Failed):
            raise EngineStartFailed(f"The engine failed its warm-up request: {event.message}")
    return time.monotonic() - began
