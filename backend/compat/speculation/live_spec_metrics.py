"""The optimized engine's drafts and their acceptance reach the app while a reply streams.

vLLM 0.32 keeps each request's speculative-decoding record (``RequestSpecDecodeMetrics``: drafts
proposed, the histogram of accepted ones) in the engine core and sends it only with the finished
output: the scheduler attaches it when ``finish_reason`` is set (``Scheduler.update_from_output``)
and the front end copies it into a ``CompletionOutput`` only when finished
(``RequestState._new_completion_output``). So a reply's acceptance could be shown only at its end.
Where the engine's environment sets ``GEMMA_CHAT_LIVE_SPEC_METRICS=1`` (the optimized path does
when it speculates; the baseline never does), the scheduler also attaches a summary — proposed
drafts and the accepted histogram, without the per-step lists that the finished output carries — to
every unfinished output of a request whose record changed since it last sent one (a step that
drafts nothing sends nothing); the front end (patched in every process: it only
passes on what the core sent) puts the latest record into each streamed output. The figures are the
engine's own count, not reconstructed from the stream. Nothing here touches a token. Standard
library only until vLLM's modules are imported.
"""

from __future__ import annotations

from typing import Any

from backend.compat.after_import import after_import
from backend.compat.engine_log import log_once
from backend.compat.wrap import wrap
from backend.config import switch_rules
from backend.config.switch_rules import on

SCHEDULER = "vllm.v1.core.sched.scheduler"
OUTPUT_PROCESSOR = "vllm.v1.engine.output_processor"
ENV = switch_rules.LIVE_SPEC_METRICS
_PATCHED = "_gemma_chat_live_spec_metrics"
LABEL = "live spec metrics"
_SENT = "_gemma_chat_drafts_sent"
"""On a request: its proposed drafts when its record was last attached."""
IN_USE = "gemma-chat live spec metrics: in use (each streamed output carries the drafts so far)"


def summary(record: Any) -> Any:
    """A copy of a request's record without its per-step lists (small enough to send each step)."""
    return type(record)(
        num_spec_tokens=record.num_spec_tokens,
        histogram=list(record.histogram),
        num_draft_tokens=record.num_draft_tokens,
    )


def attach(outputs: Any, requests: Any) -> int:
    """Attach each unfinished output's request record (a summary) where it changed since the
    last one attached; how many were attached."""
    attached = 0
    for batch in outputs.values():
        for output in batch.outputs:
            if output.finish_reason is not None or output.spec_decode_metrics is not None:
                continue
            request = requests.get(output.request_id)
            record = getattr(request, "spec_decode_metrics", None)
            if record is not None and record.num_draft_tokens != getattr(request, _SENT, 0):
                output.spec_decode_metrics = summary(record)
                setattr(request, _SENT, record.num_draft_tokens)
                attached += 1
    return attached


def _attaching(original: Any) -> Any:
    def update_from_output(self: Any, *args: Any, **kwargs: Any) -> Any:
        outputs = original(self, *args, **kwargs)
        if attach(outputs, self.requests):
            log_once(IN_USE)
        return outputs

    return update_from_output


def patch_scheduler(module: Any) -> None:
    if on(ENV):
        wrap(module, {"Scheduler.update_from_output": _attaching}, mark=_PATCHED, label=LABEL)


def _passing_on(original: Any) -> Any:
    def _new_completion_output(self: Any, *args: Any, **kwargs: Any) -> Any:
        completion = original(self, *args, **kwargs)
        if completion.spec_decode_metrics is None and self.spec_decode_metrics is not None:
            completion.spec_decode_metrics = self.spec_decode_metrics
        return completion

    return _new_completion_output


def patch_output_processor(module: Any) -> None:
    wrap(module, {"RequestState._new_completion_output": _passing_on}, mark=_PATCHED, label=LABEL)


def install_import_hook() -> None:
    after_import(SCHEDULER, patch_scheduler)
    after_import(OUTPUT_PROCESSOR, patch_output_processor)
