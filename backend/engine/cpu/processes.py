"""The processes an engine's start spawned (vLLM's engine core and worker), and their memory."""

from __future__ import annotations

import psutil


def spawned(before: set[int]) -> list[psutil.Process]:
    """This process's vLLM children that were not there ``before`` (pids)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in before and (
                "VLLM" in child.name() or "multiprocessing" in " ".join(child.cmdline())
            ):
                found.append(child)
        except psutil.Error:
            continue
    return found


def with_children(processes: list[psutil.Process]) -> list[psutil.Process]:
    """``processes`` and all their children, each once (those whose children are unreadable left out)."""
    members: dict[int, psutil.Process] = {}
    for process in processes:
        try:
            family = [process, *process.children(recursive=True)]
        except psutil.Error:
            continue
        for member in family:
            members.setdefault(member.pid, member)
    return list(members.values())


def resident_anon_bytes(processes: list[psutil.Process]) -> int:
    """Their anonymous resident memory (``RssAnon``), with their own children; 0 where unreadable."""
    from backend.compat.processes.memory_trace import rss_anon_bytes

    return sum(rss_anon_bytes(member.pid) or 0 for member in with_children(processes))


DEAD = "The engine process stopped unexpectedly; restart the engine to continue."
OUT_OF_MEMORY = (
    "The engine ran out of memory: the system's OOM killer ended it. Restart the engine to continue; "
    "close other programs first, or lower kv_cache_gib or max_model_len (on a CPU, "
    '`gemma-chat paths` shows the host-memory plan; engine.both_paths = "swap" keeps one engine '
    "in memory at a time)."
)


def oom_kills() -> int | None:
    """The kernel's count of processes its OOM killer has ended since boot (None: not readable)."""
    try:
        with open("/proc/vmstat", encoding="ascii") as vmstat:
            for line in vmstat:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def dead_message(kills_before: int | None) -> str:
    """What to tell the user of an engine that died: out of memory where the kernel's OOM killer
    has ended a process since the engine started, else that it stopped unexpectedly."""
    now = oom_kills()
    if kills_before is not None and now is not None and now > kills_before:
        return OUT_OF_MEMORY
    return DEAD


def release_memory() -> None:
    """After an engine's front end is dropped: collect it, and give the C heap's free pages back to
    the system (vLLM's front end of a large model — tokenizer, processors — leaves them behind:
    measured 0.5 GiB a start at E2B's size in the app's process, without this)."""
    import gc

    from backend.compat.processes.malloc_trim import trim

    gc.collect()
    trim()
