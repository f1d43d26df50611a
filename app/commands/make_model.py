"""``gemma-chat make-model DIR``: a random-weight Gemma 4 checkpoint and its MTP drafter, or
(``--real-weights``) Gemma 3 270M with real weights.

``DIR`` must be new, empty, or a folder gemma-chat made (``backend.checkpoints.output_folder``):
anything else is refused by name before any work. A full disk, too little memory or a folder that
cannot be written each end in one sentence naming the cause, not an internal error."""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def run_make_model(args: argparse.Namespace) -> int:
    from backend.checkpoints.output_folder import build_failure

    started = time.monotonic()
    out = Path(args.out).expanduser()
    try:
        if getattr(args, "real_weights", False):
            return _real_weights(out, started)
        return _generated(args, out, started)
    except (OSError, MemoryError, RuntimeError) as error:
        failure = build_failure(error, out)
        if failure is None:
            raise
        raise failure from error


def _generated(args: argparse.Namespace, out: Path, started: float) -> int:
    from backend.checkpoints import make_checkpoint
    from backend.checkpoints.output_folder import claim, done_filling, start_filling
    from backend.checkpoints.sizes import repeating, size_named
    from backend.checkpoints.writer import MANIFEST

    claim(out, (MANIFEST,))
    start_filling(out)
    try:
        size = size_named(args.size)
        if getattr(args, "repeating", False):
            size = repeating(size)
        written = make_checkpoint(out, size, args.seed, centroids=args.centroids)
    except ValueError as error:
        print(f"gemma-chat make-model: {error}")
        return 2
    done_filling(out)
    size_mb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    centroids = f", drafter with {args.centroids} centroids" if args.centroids else ""
    print(
        f"wrote {written.model} and {written.drafter} ({size_mb:.1f} MB, size {size.name}, seed {args.seed}"
        f"{centroids}) in {time.monotonic() - started:.1f} s"
    )
    print(f'try it: gemma-chat ask --model {out} "Hello"')
    return 0


def _real_weights(out: Path, started: float) -> int:
    from backend.checkpoints.real_weights import RealWeightsUnavailable, ensure

    try:
        ensure(out)
    except (RealWeightsUnavailable, ImportError) as error:
        print(f"gemma-chat make-model: the real-weights checkpoint could not be built: {error}")
        return 1
    print(f"real weights (Gemma 3 270M, bfloat16) in {out} after {time.monotonic() - started:.1f} s")
    print(f'try it: gemma-chat ask --model {out} --path compare --speculation ngram "Hello"')
    return 0
