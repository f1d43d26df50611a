"""The plain-PyTorch peer: transformers' ``generate`` on the same checkpoint and prompts as vLLM.

Prompts are the already-rendered chat strings (they start with ``<bos>``), tokenized with
``add_special_tokens=False`` and left-padded with the tokenizer's ``<pad>``. Decoding is greedy
with ``min_new_tokens == max_new_tokens`` so every prompt yields exactly that many tokens (vLLM's
``ignore_eos``). Model loading and one short warm-up generation (the first batch, two new
tokens) are excluded from the timings. A checkpoint directory without weight files (the dummy
E2B one) gets seeded random weights, as vLLM's ``load_format="dummy"`` does.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.bench.roofs import torch_threads

if TYPE_CHECKING:
    from backend.bench.options import BenchOptions, Progress
    from backend.config.settings import Settings
    from backend.engine.model.source import ModelSource

WARMUP_NEW_TOKENS = 2


@dataclass(frozen=True)
class PeerResult:
    """A batched run: per-prompt generated ids, in prompt order."""

    token_ids: tuple[tuple[int, ...], ...]
    generated_tokens: int
    wall_s: float
    load_s: float
    batch_size: int
    threads: int
    dtype: str

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class PeerSingleResult:
    """One prompt at a time: time to first token and decode rate per prompt."""

    token_ids: tuple[tuple[int, ...], ...]
    ttft_s: tuple[float, ...]
    decode_tokens_per_s: tuple[float, ...]
    load_s: float
    threads: int
    dtype: str

    @property
    def mean_ttft_s(self) -> float:
        return sum(self.ttft_s) / len(self.ttft_s) if self.ttft_s else 0.0

    @property
    def mean_decode_tokens_per_s(self) -> float:
        rates = self.decode_tokens_per_s
        return sum(rates) / len(rates) if rates else 0.0


def run_transformers_generate(
    model_dir: str, prompts: list[str], max_new_tokens: int, batch_size: int, dtype: str, threads: int | None
) -> PeerResult:
    """Generate for ``prompts`` in batches of ``batch_size``; time all batches together."""
    if batch_size < 1 or not prompts:
        raise ValueError(f"need at least one prompt and a batch size of at least 1, got {batch_size}")
    with torch_threads(threads) as used:
        start = time.perf_counter()
        model, tokenizer = load_peer(model_dir, dtype)
        load_s = time.perf_counter() - start
        batches = [prompts[i : i + batch_size] for i in range(0, len(prompts), batch_size)]
        _check_prompts(tokenizer, prompts)
        _generate(model, tokenizer, batches[0], min(max_new_tokens, WARMUP_NEW_TOKENS))
        start = time.perf_counter()
        outputs = [ids for batch in batches for ids in _generate(model, tokenizer, batch, max_new_tokens)]
        wall_s = time.perf_counter() - start
    return PeerResult(
        token_ids=tuple(outputs),
        generated_tokens=sum(len(ids) for ids in outputs),
        wall_s=wall_s,
        load_s=load_s,
        batch_size=batch_size,
        threads=used,
        dtype=dtype,
    )


def run_transformers_single(
    model_dir: str, prompts: list[str], max_new_tokens: int, dtype: str, threads: int | None
) -> PeerSingleResult:
    """One prompt at a time. A streamer timestamps every new token of the same ``generate`` call:
    TTFT runs from just before tokenizing to the first new token (prefill included); the decode
    rate is (tokens - 1) / (last token time - first token time)."""
    with torch_threads(threads) as used:
        start = time.perf_counter()
        model, tokenizer = load_peer(model_dir, dtype)
        load_s = time.perf_counter() - start
        _check_prompts(tokenizer, prompts)
        if prompts:
            _generate(model, tokenizer, prompts[:1], min(max_new_tokens, WARMUP_NEW_TOKENS))
        runs = [_timed_single(model, tokenizer, prompt, max_new_tokens) for prompt in prompts]
    return PeerSingleResult(
        token_ids=tuple(ids for ids, _, _ in runs),
        ttft_s=tuple(ttft for _, ttft, _ in runs),
        decode_tokens_per_s=tuple(rate for _, _, rate in runs),
        load_s=load_s,
        threads=used,
        dtype=dtype,
    )


def load_peer(model_dir: str, dtype: str) -> tuple[Any, Any]:
    """(model, tokenizer) in eval mode, the tokenizer padding on the left with its ``<pad>``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        raise ValueError(f"the tokenizer in {model_dir} has no pad token; left padding needs one")
    torch_dtype = getattr(torch, dtype)
    if any(Path(model_dir).glob("*.safetensors")):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype)
    else:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch_dtype)
    return model.eval(), tokenizer


def _check_prompts(tokenizer: Any, prompts: list[str]) -> None:
    bos = tokenizer.bos_token
    if bos and any(not prompt.startswith(bos) for prompt in prompts):
        raise ValueError(f"prompts must be rendered chat prompts starting with {bos} (Gemma needs it)")


def _generate(
    model: Any, tokenizer: Any, prompts: list[str], new_tokens: int, streamer: Any = None
) -> list[tuple[int, ...]]:
    import torch

    inputs = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        output = model.generate(
            **inputs,
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            streamer=streamer,
        )
    prompt_len = inputs["input_ids"].shape[1]
    return [tuple(int(t) for t in row[prompt_len:]) for row in output]


class _TokenClock:
    """A ``generate`` streamer that timestamps each new token (its first ``put`` is the prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if self._prompt_seen:
            self.times.append(time.perf_counter())
        self._prompt_seen = True

    def end(self) -> None:
        pass


def _timed_single(
    model: Any, tokenizer: Any, prompt: str, new_tokens: int
) -> tuple[tuple[int, ...], float, float]:
    clock = _TokenClock()
    start = time.perf_counter()
    (ids,) = _generate(model, tokenizer, [prompt], new_tokens, streamer=clock)
    ttft = clock.times[0] - start
    span = clock.times[-1] - clock.times[0]
    rate = (len(clock.times) - 1) / span if span > 0 else 0.0
    return ids, ttft, rate


@dataclass
class PeerRun:
    """What the bench measured of transformers (one run: a reference, not a ratio)."""

    dtype: str
    threads: int
    throughput: PeerResult | None = None
    single: PeerSingleResult | None = None


def run_peer(
    source: ModelSource,
    settings: Settings,
    options: BenchOptions,
    rendered: dict[str, list[str]],
    progress: Progress,
    dtype: str,
) -> PeerRun | None:
    """transformers' ``generate`` on ``throughput`` (one batch) and ``single`` (one at a time)."""
    wanted = [w for w in ("throughput", "single") if w in options.workloads and rendered.get(w)]
    if not options.peer or not wanted:
        return None
    threads = os.cpu_count() or 1  # transformers as a user runs it: every core
    peer = PeerRun(dtype=dtype, threads=threads)
    if "throughput" in wanted:
        progress("transformers: throughput", 0, 1)
        prompts = rendered["throughput"]
        peer.throughput = run_transformers_generate(
            str(source.path), prompts, options.max_tokens, len(prompts), dtype, threads
        )
        progress("transformers: throughput", 1, 1)
    if "single" in wanted:
        progress("transformers: single", 0, 1)
        peer.single = run_transformers_single(
            str(source.path), rendered["single"], options.max_tokens, dtype, threads
        )
        progress("transformers: single", 1, 1)
    return peer
