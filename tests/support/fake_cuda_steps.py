"""A step of Model Runner V2's Gemma 4 drafter, on the faked CUDA platform (``tests/support/fake_cuda.py``
builds the drafter through vLLM's own ``init_speculator``; this calls it as the runner would)."""

from __future__ import annotations

from typing import Any


def zero_draft_step(drafter: Any) -> dict[str, Any]:
    """V2's ``propose`` for a step of 3 requests that asks for no drafts, as the runner calls it,
    with gemma-chat's hooks and without them (``__wrapped__``): whether the drafter's work started
    (its first stage, copying the requests' sampling inputs, records the call and stops there)
    and what the call answered. The same call as a dummy run (start-up, graph capture) must reach
    the drafter either way."""
    import types

    import torch

    cls = type(drafter)
    started: list[str] = []

    def first_stage(*args: Any, **kwargs: Any) -> None:
        started.append("drafter")
        raise RuntimeError("the drafter ran")

    drafter._copy_request_inputs = first_stage
    batch = types.SimpleNamespace(
        num_reqs=3,
        idx_mapping=torch.arange(3, dtype=torch.int32),
        num_tokens=3,
        num_tokens_after_padding=3,
        num_scheduled_tokens=torch.ones(3, dtype=torch.int32),
        seq_lens_cpu_upper_bound=torch.full((3,), 5),
    )
    none = torch.zeros(3, dtype=torch.int32)
    args = (batch, {}, {}, torch.zeros(3, 8), None, none, none, none, none, none, none)
    out: dict[str, Any] = {}
    for name, propose in (
        ("patched", cls.propose),
        ("vllm_alone", getattr(cls.propose, "__wrapped__", None)),
    ):
        if propose is None:
            out[name] = "not patched"
            continue
        for kind, extra in (("step", {}), ("dummy_run", {"dummy_run": True})):
            started.clear()
            try:
                answer = propose(drafter, *args, num_speculative_tokens=0, **extra)
                shown: Any = answer.tolist()
            except RuntimeError as error:
                shown = str(error)
            out[f"{name}_{kind}"] = {"drafter_started": bool(started), "answer": shown}
    return out
