"""``gemma-chat bench --startup``: how long an engine takes from launch to its first token, by stage.

Each run is a fresh process, as a user's launch is: ``gemma-chat ask … --max-tokens 8 --timings``
(backend.engine.local.startup). The first run is cold — vLLM's compile cache is a new, empty folder —
and the next ``--repetitions`` runs are warm on the cache that run left. The user's own compile
cache is neither read nor changed. Printed: every run's stages, then each stage's median and range
over the warm runs, with the CPU's flags (the figures belong to the machine they come from).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from backend.bench.spread import Spread
from backend.engine.local.startup import STAGES
from backend.provenance import cpu_flags

FLAGS = {
    "model": "--model",
    "demo": "--demo",
    "path": "--path",
    "max_model_len": "--max-model-len",
    "dtype": "--dtype",
    "kv_cache_gib": "--kv-cache-gib",
    "speculation": "--speculation",
    "draft_tokens": "--draft-tokens",
}
"""The model and engine flags a run passes on to ``ask`` (servers and MCP have no start to time)."""
RUN_TIMEOUT_S = 600


def ask_command(args: argparse.Namespace) -> list[str]:
    """The ``ask`` a run launches: this command's model and engine flags, a short reply, timings."""
    command = [sys.executable, "-m", "app.cli", "ask"]
    for dest, flag in FLAGS.items():
        value = getattr(args, dest, None)
        if value is True:
            command.append(flag)
        elif value not in (None, False):
            command += [flag, str(value)]
    return [*command, "--no-tools", "--max-tokens", "8", "--json", "--timings", "Hello"]


def run_once(command: list[str], cache_root: Path) -> dict[str, float]:
    """One launch's stages (seconds by name, ``total`` included). Raises RuntimeError on failure."""
    env = {**os.environ, "VLLM_CACHE_ROOT": str(cache_root)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    try:
        startup = json.loads(done.stdout)["startup"]
    except (ValueError, KeyError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the run failed (exit {done.returncode}): {' / '.join(tail)}") from None
    return {**startup["stages"], "total": startup["total_s"]}


def table(runs: list[tuple[str, dict[str, float]]]) -> str:
    """Stages down, runs across, then the warm runs' median (range)."""
    seen = {name for _, stages in runs for name in stages}
    stages = [name for name in STAGES if name in seen]
    stages += [*sorted(seen - set(STAGES) - {"total"}), "total"]
    warm = [stages_ for label, stages_ in runs if label.startswith("warm")]
    header = ["stage (s)", *(label for label, _ in runs), "warm: median (range)"]
    rows = [header]
    for stage in stages:
        spread = Spread(tuple(s[stage] for s in warm if stage in s))
        summary = (
            f"{spread.median:.1f} ({spread.low:.1f}-{spread.high:.1f})"
            if spread.median is not None and spread.low is not None and spread.high is not None
            else "-"
        )
        rows.append([stage, *(f"{s[stage]:.1f}" if stage in s else "-" for _, s in runs), summary])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def run_startup_bench(args: argparse.Namespace) -> int:
    if getattr(args, "path", None) == "compare" or getattr(args, "server", None):
        print("gemma-chat bench --startup: times one in-process engine; leave out compare and --server")
        return 2
    command = ask_command(args)
    print(f"gemma-chat bench --startup: {' '.join(command[2:])}")
    print(f"cpu flags: {' '.join(cpu_flags()) or 'unknown'}")
    runs: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="gemma-chat-startup-") as cache:
        for index in range(1 + args.repetitions):
            label = "cold" if index == 0 else f"warm {index}"
            try:
                stages = run_once(command, Path(cache))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                print(f"{label}: {error}")
                return 1
            runs.append((label, stages))
            print(f"{label}: {stages['total']:.1f} s", flush=True)
    print()
    print(table(runs))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"cpu_flags": cpu_flags(), "runs": dict(runs)}, indent=2) + "\n"
        )
    return 0
