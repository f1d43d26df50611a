"""The reference for parity under load: the baseline's tokens for each batched request run alone.

Stock vLLM's greedy tokens for a request depend on what runs beside it: on a native-bfloat16 CPU
oneDNN rounds a step of one row and a step of several rows differently (another block of the inner
sum), so the baseline at 4 requests at once does not give each request the tokens it gives it alone.
The optimized path computes each request's rows as that request alone would, in every step
(row-exact ``all`` with the one-pass kernel): its tokens are the baseline's alone, whatever else
runs. So under load the bench compares each request with the baseline's run of it alone — untimed,
after the timed runs — and says how often the baseline's own batched tokens kept them.
"""

from __future__ import annotations

from backend.bench.options import BenchOptions, is_throughput
from backend.bench.request_sets import prompt_sets
from backend.bench.workload_runs import WorkloadRun, run_sequential
from backend.bench.workloads import Workloads
from backend.engine.parity import ParityReport
from backend.engine.protocol import Engine

SUFFIX = " alone"
"""A batched workload's reference run: ``throughput alone``, ``throughput@4 alone``."""


def alone_name(workload: str) -> str:
    return workload + SUFFIX


def batched(options: BenchOptions) -> list[str]:
    """The workloads whose requests run together, whose parity is taken against the baseline alone."""
    return [name for name in options.workloads if is_throughput(name)]


async def run_alone(
    engine: Engine, options: BenchOptions, workloads: Workloads
) -> dict[str, list[WorkloadRun]]:
    """Each batched workload's requests one at a time on ``engine`` (the baseline), not timed."""
    sets = prompt_sets(workloads, options)
    runs: dict[str, list[WorkloadRun]] = {}
    for name in batched(options):
        run = await run_sequential(
            engine, "baseline", alone_name(name), sets[name], options.max_tokens, _quiet
        )
        runs[alone_name(name)] = [run]
    return runs


def _quiet() -> None:
    return None


def alone_markdown(batched: dict[str, ParityReport], parity: dict[str, ParityReport]) -> list[str]:
    """The report's lines on the reference under load, where one was run."""
    lines = []
    for name, own in batched.items():
        optimized = parity.get(name)
        kept = (
            f"{own.identical_requests}/{len(own.results)} requests · {own.position_fraction:.1%} of positions"
        )
        ours = (
            f"; the optimized path on {optimized.identical_requests}/{len(optimized.results)}"
            if optimized
            else ""
        )
        lines.append(
            f"{name}: parity is against each request's tokens from the baseline alone (run once after "
            f"the timed runs); the baseline's own batched tokens kept them on {kept}{ours} — stock "
            "vLLM's tokens depend on what runs beside a request, the optimized path's do not."
        )
    return ["", *lines] if lines else []
