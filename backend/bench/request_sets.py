"""A bench run's requests: each workload's prompts as engine-ready messages (``prompt_sets``)."""

from __future__ import annotations

from backend.bench.options import BenchOptions, level
from backend.bench.workload_runs import BenchPrompt
from backend.bench.workloads import Workloads
from backend.gemma4.messages import ChatMessage


def prompt_sets(workloads: Workloads, options: BenchOptions) -> dict[str, list[BenchPrompt]]:
    def user(text: str) -> tuple[ChatMessage, ...]:
        return (ChatMessage("user", text),)

    throughput = [BenchPrompt(p.id, user(p.text)) for p in workloads.throughput]

    def distinct(count: int) -> list[BenchPrompt]:
        """``count`` requests, the prompts repeated in turn, each with its own id and its number
        first (``[N]``), so no two share a prefix-cache block: the chat template's header is a few
        tokens, vLLM caches whole blocks of 16 (the rows measure computing, not the prefix cache)."""
        texts = [workloads.throughput[i % len(throughput)] for i in range(count)]
        return [BenchPrompt(f"{p.id}#{i}", user(f"[{i}] {p.text}")) for i, p in enumerate(texts)]

    unique = distinct(options.requests)
    single = throughput[-options.single_requests :]
    chosen = []
    for kind in dict.fromkeys(m.media.kind for m in workloads.media):
        chosen += [m for m in workloads.media if m.media.kind == kind][: options.media_per_kind]
    media = [
        BenchPrompt(m.id, (ChatMessage("user", m.text, media=(m.media.kind,)),), m.multi_modal_data())  # type: ignore[arg-type]
        for m in chosen
    ]
    sets = {"throughput": unique, "single": single, "media": media}
    for name in options.workloads:
        if (n := level(name)) is not None:  # the concurrency table: n distinct requests at once
            sets[name] = distinct(n)
    return sets
