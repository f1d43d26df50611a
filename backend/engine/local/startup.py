"""Where an engine start's time goes, stage by stage, from launch to the first token.

The process marks what it sees itself (``StartClock``): its launch (the operating system's
start time of the process), vLLM imported, the engine started, the warm-up done, the first token.
What happens inside vLLM's engine-core process between "imported" and "started" is read from
the engine's log (vLLM stamps each line to the second): the core up, the compile (or the compile
cache's load) begun and ended, the KV cache allocated. ``StartupTimings`` lays them end to end:

* imports: Python, gemma-chat and vLLM, from launch to vLLM imported;
* engine core: vLLM's config, the engine-core process spawned, the weights loaded;
* compile, or cache load where the compile cache loaded (backend.compat.dependencies.aot_cache_load);
* KV cache: the cache allocated and vLLM's own profiling run;
* hand-over: the engine core ready to the engine handed out (tokenizer, prompt renderer);
* warm-up: the short request before the first timed turn (backend.engine.session.warmup);
* first token: the prompt's first token.

A stage whose marks are missing (an eager engine compiles nothing) is folded into the next one.
Figures from the log are whole seconds, so those stages are good to about a second each.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime

import psutil

_STAMP = re.compile(r"^\(\S+ pid=\d+\) \w+ (\d\d-\d\d \d\d:\d\d:\d\d) ")
LOG_MARKS = (
    ("engine core", "Warming up model for the compilation"),
    ("compile", "Warming up done."),
    ("KV cache", "init engine (profile, create kv cache, warmup model) took"),
)
"""A log line that ends a stage, by stage (in the engine-core process's order)."""
STAGES = (
    "imports",
    "engine core",
    "compile",
    "cache load",
    "KV cache",
    "hand-over",
    "warm-up",
    "first token",
)
"""Every stage a start can have, in order."""
CACHE_LOADED = "Directly load AOT compilation"
COMPILED = "saved AOT compiled function"


def launched_at() -> float:
    """When this process started (seconds since the epoch)."""
    return psutil.Process().create_time()


@dataclass
class StartClock:
    """The marks this process takes along one start: each stage's end, by name."""

    launched: float = field(default_factory=launched_at)
    began: float = field(default_factory=time.time)
    marks: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, stage: str) -> None:
        self.marks.append((stage, time.time()))


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float


@dataclass(frozen=True)
class StartupTimings:
    stages: tuple[Stage, ...]

    @property
    def total_s(self) -> float:
        return sum(s.seconds for s in self.stages)

    def line(self) -> str:
        parts = " · ".join(f"{s.name} {s.seconds:.1f} s" for s in self.stages)
        return f"startup {self.total_s:.1f} s to the first token: {parts}"

    def to_json(self) -> dict[str, object]:
        return {
            "total_s": round(self.total_s, 2),
            "stages": {s.name: round(s.seconds, 2) for s in self.stages},
        }


def log_marks(log_text: str, since: float) -> list[tuple[str, float]]:
    """The engine-core stages' ends found in the log, from ``since`` on (epoch seconds), in order;
    the compile stage is called "cache load" where vLLM loaded its compile cache instead."""
    found: dict[str, float] = {}
    loaded = False
    year = datetime.fromtimestamp(since).year
    for line in log_text.splitlines():
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        when = time.mktime(time.strptime(f"{year}-{stamp.group(1)}", "%Y-%m-%d %H:%M:%S"))
        if when < int(since):
            continue
        loaded = loaded or CACHE_LOADED in line
        for stage, text in LOG_MARKS:
            if text in line and stage not in found:
                found[stage] = when
    named = {"compile": "cache load"} if loaded else {}
    return sorted(((named.get(s, s), t) for s, t in found.items()), key=lambda mark: mark[1])


def timings(clock: StartClock, log_text: str = "") -> StartupTimings:
    """The stages of one start, end to end from the launch to the last mark."""
    own = dict(clock.marks)
    marks = list(clock.marks)
    if "imports" in own and "engine" in own:
        inside = [
            (s, t) for s, t in log_marks(log_text, own["imports"]) if own["imports"] <= t <= own["engine"]
        ]
        at = marks.index(("engine", own["engine"]))
        marks[at:at] = inside
        marks[at + len(inside)] = ("hand-over", own["engine"])
    stages, previous = [], clock.launched
    for name, when in marks:
        stages.append(Stage(name, max(0.0, when - previous)))
        previous = max(previous, when)
    return StartupTimings(tuple(stages))
