"""What exact mode can promise (issue 57, item 6a), from vLLM 0.32's own Triton attention kernel
run by Triton's interpreter (``tests/support/triton_interpreted.py``): under ``VLLM_BATCH_INVARIANT`` it
always takes the 2D kernel, whose programs hold two of E2B's queries (16 rows / 8 heads a KV head).
A verifying step's second query then starts, once in 32 positions past the 512-token window, with a
tile it cannot see; the kernel's online softmax clamps that all-masked row's maximum to 0 and keeps
it, so where the token's scores in its first visible tile are all negative its output rounds
otherwise than the plain step's. On Blackwell (10.x) a step with more than one query takes wider
tiles for head_dim 256, so the sliding layers differ almost anywhere. docs/gpu.md, "Exact tokens",
states both limits; this test fails when vLLM changes either, so the page can be corrected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_exact_mode_is_bitwise_except_where_the_docs_say() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "triton_interpreted.py")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("TRITON-INTERPRETED ")), None)
    assert line is not None, done.stderr[-3000:]
    same = json.loads(line.split(" ", 1)[1])
    assert same == {
        "sliding, first tile masked, scores negative": False,
        "sliding, first tile masked, scores random": True,
        "sliding, 575 (first tile masked), scores negative": False,
        "sliding, 544 (first tile not masked), scores negative": True,
        "sliding, 287 (within the first window), scores negative": True,
        "full, 543, scores negative": True,
        "b200: sliding, 600, scores random": False,
        "b200: full, 600, scores random": True,
    }
