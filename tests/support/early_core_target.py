"""A stand-in for vLLM's engine-core entry point (same qualified name), for the early-start tests."""

from __future__ import annotations

import json
import os
import sys


class EngineCoreProc:
    @staticmethod
    def run_engine_core(out: str, marker: str) -> None:
        with open(f"/proc/{os.getpid()}/environ", "rb") as f:
            at_exec = dict(
                item.split("=", 1) for item in f.read().decode(errors="replace").split("\0") if "=" in item
            )
        result = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "marker": os.environ.get(marker),
            "marker_at_exec": at_exec.get(marker),
            "preloaded": "colorsys" in sys.modules,
        }
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)
