"""vLLM's prompt and sampling parameters for an ``EngineRequest`` (imported from vLLM when first asked)."""

from __future__ import annotations

from typing import Any

from backend.engine import env as vllm_env
from backend.engine.protocol import EngineRequest


def sampling_params(request: EngineRequest) -> Any:
    """vLLM's ``SamplingParams`` for a request: its outputs as deltas (or once, at the end, for a
    ``final_only`` request), special tokens kept."""
    vllm_env.prepare()
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    s = request.sampling
    return SamplingParams(
        max_tokens=s.max_tokens,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k if s.top_k > 0 else -1,
        seed=s.seed,
        ignore_eos=s.ignore_eos,
        skip_special_tokens=False,
        spaces_between_special_tokens=False,
        output_kind=RequestOutputKind.FINAL_ONLY if request.final_only else RequestOutputKind.DELTA,
        extra_args=dict(request.extra_args) or None,
    )


def vllm_prompt(request: EngineRequest) -> dict[str, Any]:
    """vLLM's prompt for a request: its text, with its media and their processor's arguments."""
    prompt: dict[str, Any] = {"prompt": request.prompt}
    if request.multi_modal_data:
        prompt["multi_modal_data"] = request.multi_modal_data
    if request.mm_processor_kwargs:
        prompt["mm_processor_kwargs"] = request.mm_processor_kwargs
    return prompt
