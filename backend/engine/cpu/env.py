"""What the optimized path adds to a CPU engine's process environment: the bfloat16 linear
kernel and its threads, the model worker inside the engine-core process, one call to the worker
per step, and (opt-in) every core.

One function, so the engine's configuration and the key a measured speculation choice is
stored under (``backend.engine.speculation.choice``) see the same values: a choice measured
under another kernel build, thread count or wait does not apply.
"""

from __future__ import annotations

import os

from backend.config.settings import EngineSettings
from backend.config.switch_rules import DRAFT_SCHEDULE as DRAFT_SCHEDULE_ENV
from backend.config.switch_rules import FORCE_ROW_EXACT, row_exact_forced_on, row_exact_rows_only
from backend.config.switch_rules import NO_PREFILL_DRAFTS as NO_PREFILL_DRAFTS_ENV
from backend.config.switch_rules import ONE_CALL_STEP as ONE_CALL_STEP_ENV
from backend.config.switch_rules import ROW_EXACT as ROW_EXACT_ENV
from backend.config.switch_rules import ROW_EXACT_KERNEL as ROW_EXACT_KERNEL_ENV
from backend.config.switch_rules import SAMPLED_ROW_DRAFTS as SAMPLED_ROW_DRAFTS_ENV
from backend.config.switch_rules import UNI_WORKER as UNI_WORKER_ENV
from backend.engine.argument import Argument
from backend.kernels.env import AVX2_FORCES, FORCE_ENV, forced
from backend.kernels.env import KERNEL_ENV as CPU_LINEAR_ENV
from backend.kernels.env import THREADS_ENV as CPU_LINEAR_THREADS_ENV


def optimized_cpu_env(settings: EngineSettings) -> tuple[dict[str, Argument], tuple[str, ...]]:
    """The optimized CPU engine's extra environment, and notes on what could not be used."""
    from backend.kernels.bf16_linear import for_engine

    env: dict[str, Argument] = {}
    notes: tuple[str, ...] = ()
    kernel, why_not = for_engine()
    if kernel is not None:
        env[CPU_LINEAR_ENV] = Argument(
            str(kernel),
            "bfloat16 linear layers through gemma-chat's kernel: bit-identical to PyTorch's "
            "(checked in the engine before use), 2-4x faster on a CPU without native bfloat16",
        )
        env[CPU_LINEAR_THREADS_ENV] = Argument(
            os.cpu_count() or 1,
            "the kernel's threads, one per core: besides the model's own, the cores vLLM keeps "
            "for its front end, which waits while the model computes; a helper whose core is "
            "busy leaves its column blocks to the model's thread (threads change no bit)",
        )
    else:
        notes = (f"bfloat16 linear kernel not used: {why_not}",)
    one_pass, one_pass_why_not = one_pass_env()
    env.update(one_pass)
    if one_pass_why_not and kernel is None:  # on AVX2 the bfloat16 kernel is the one that applies
        notes = (*notes, one_pass_why_not)
    if forced() in AVX2_FORCES:
        notes = (*notes, f"{FORCE_ENV}={forced()}: every engine computes bfloat16 linears as on AVX2")
    env[ONE_CALL_STEP_ENV] = Argument(
        1,
        "a decode step is one call from the engine core to the model worker instead of two: the "
        "worker samples at the end of its forward pass when the step has no structured output "
        "(the core's second call would be sample_tokens(None); the same functions, no bit changes)",
    )
    env[UNI_WORKER_ENV] = Argument(
        1,
        "the model worker computes inside the engine-core process (vLLM's uniprocess executor), "
        "with exactly the OpenMP threads and binding vLLM gives its worker process: no ring "
        "between the two processes each step (no bit changes); nothing spins between steps there",
    )
    if settings.cpu_all_cores:
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = Argument(
            0,
            "run the model on every core (opt-in: faster, but in bfloat16 it changed greedy tokens "
            "on 3 of 19 parity prompts)",
        )
    return env, notes


def row_exact_env(one_pass: bool = False) -> dict[str, Argument]:
    """Row-exact verification, unless ``GEMMA_CHAT_FORCE_ROW_EXACT`` is off (0, false, no or off:
    to measure what it costs, or to show the divergence it prevents); ``rows`` keeps it on without
    the one-pass kernel (``one_pass_env``). With the one-pass kernel (``one_pass``) every step of
    several rows computes each request's rows as it would alone (``all``): the kernel gives any row
    its one-row order at no extra cost, and a request's tokens then do not depend on what else runs."""
    if not row_exact_forced_on():
        return {}
    if one_pass:
        return {
            ROW_EXACT_ENV: Argument(
                "all",
                "each request's rows get the bits that request's one-row steps give them, in every "
                "step — verifying drafts or batched with other requests: greedy tokens are the "
                "baseline's alone by construction, whatever else runs (the one-pass kernel computes "
                "every row in that order at the cost of one pass over the weights)",
            )
        }
    return {
        ROW_EXACT_ENV: Argument(
            1,
            "a verifying step's rows get the bits a one-row step gives them: each linear layer "
            "whose matmul rounds differently with more rows (checked at load; oneDNN's bfloat16 "
            "matmul does for inner sizes of 1,536 and more) computes each request's rows as it "
            "would alone, so greedy tokens are the baseline's by construction",
        )
    }


def one_pass_env() -> tuple[dict[str, Argument], str | None]:
    """The one-pass kernel where this CPU has AVX512-BF16, unless ``GEMMA_CHAT_FORCE_ROW_EXACT``
    asks for ``rows`` (verified rows one at a time through vLLM's own matmul); else why not."""
    if row_exact_rows_only():
        return {}, f"one-pass kernel not used: {FORCE_ROW_EXACT}=rows"
    from backend.kernels.row_exact_bf16 import for_engine

    kernel, why_not = for_engine()
    if kernel is None:
        return {}, f"one-pass kernel not used: {why_not}"
    return {
        ROW_EXACT_KERNEL_ENV: Argument(
            str(kernel),
            "bfloat16 linear layers through gemma-chat's AVX512-BF16 kernel where it is proven, at "
            "load, to give the bits of the layer's own matmul (one row: a plain step; 2-64 rows: a "
            "batch or a prefill): vLLM's copy is freed, a plain step reads the weights faster, and "
            "a step verifying k drafts computes each row in the one-row order in one pass over "
            "the weights (about one plain step, not 1 + k)",
        )
    }, None


def speculating_cpu_env(one_pass: bool = False) -> dict[str, Argument]:
    """What the optimized CPU engine adds to its environment when it speculates (``one_pass``: with
    the one-pass row-exact kernel in its environment)."""
    return {
        **row_exact_env(one_pass),
        NO_PREFILL_DRAFTS_ENV: Argument(
            1,
            "a step in which every request is prefilling answers without running the drafter, so "
            "the first token does not wait for drafts (the next step drafts as usual), and a step "
            "that asks for no drafts (above the schedule's limit) runs no drafter pass for nothing "
            "(drafts never change a token)",
        ),
        SAMPLED_ROW_DRAFTS_ENV: Argument(
            1,
            "Gemma 4's drafter (no cache of its own) computes only the row of each request it "
            "samples: vLLM's first pass computes every verified row and drops all but one (drafts "
            "never change a token)",
        ),
        DRAFT_SCHEDULE_ENV: Argument(
            1,
            "the number of drafts a step proposes can be set while the engine runs: the first start "
            "measures each on this one engine, and every start applies what was decided (drafts "
            "never change a token)",
        ),
    }
