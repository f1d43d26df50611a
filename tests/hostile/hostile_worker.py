"""Runs hostile-input cases one at a time in forked children and reports each one's outcome,
time and peak memory: ``python -m tests.hostile.hostile_worker`` reads JSON lines on stdin, answers on stdout.

A fresh interpreter (no torch, no threads) forks a child per case, so a case's memory is its
own: the child's peak resident size (``wait4``'s ``ru_maxrss``) minus the worker's size at the
fork. A child still running at its deadline is killed and reported as ``hang``.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")


def _resident_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE // 1024


def _child(case: dict[str, Any], out: int) -> None:
    module, _, name = case["call"].partition(":")
    try:
        if case.get("file_limit_bytes"):  # a full disk: writes past the limit fail with EFBIG
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            limit = int(case["file_limit_bytes"])
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        function = getattr(importlib.import_module(module), name)
        result = {"outcome": "ok", "message": str(function(*case.get("args", [])))}
    except BaseException as error:
        from backend.errors import GemmaChatError

        expected = isinstance(error, GemmaChatError | PermissionError | OSError | ValueError)
        text = str(error) if expected else traceback.format_exc()
        result = {
            "outcome": "refused" if expected else "crash",
            "message": text,
            "type": type(error).__name__,
        }
    os.write(out, json.dumps(result).encode())
    os.close(out)
    os._exit(0)


def run(case: dict[str, Any]) -> dict[str, Any]:
    read, write = os.pipe()
    base_kb = _resident_kb()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(case, write)
    os.close(write)
    deadline = started + float(case.get("timeout_s", 30))
    while True:
        done, _status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            os.close(read)
            return {"outcome": "hang", "message": "", "seconds": time.monotonic() - started, "peak_mb": 0.0}
        time.sleep(0.005)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    result = json.loads(b"".join(chunks) or b'{"outcome": "crash", "message": "the case died"}')
    result["seconds"] = time.monotonic() - started
    result["peak_mb"] = max(0, usage.ru_maxrss - base_kb) / 1024
    return result


def main() -> None:
    # What every case may need, imported once before the forks (the children share it).
    import av  # noqa: F401
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import soundfile  # noqa: F401
    import soxr  # noqa: F401

    import backend.chat.conversation
    import backend.config.settings
    import backend.media.load
    import backend.tools.builtins  # noqa: F401
    import tests.hostile.hostile_cases  # noqa: F401

    for line in sys.stdin:
        sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
