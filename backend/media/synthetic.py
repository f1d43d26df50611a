"""Deterministic media for prompt sets, tests and benchmarks (no files needed)."""

from __future__ import annotations

from typing import Any

AUDIO_RATE = 16000


def image(seed: int, width: int, height: int) -> Any:
    """A smooth colour pattern with noise, as an RGB ``PIL.Image``; same seed, same pixels."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 6.28, size=3)
    channels = [127 + 100 * np.sin(x / (7 + 5 * i) + y / (11 + 3 * i) + phase[i]) for i in range(3)]
    pixels = np.stack(channels, axis=-1) + rng.normal(0, 12, size=(height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def audio(seed: int, seconds: float) -> tuple[Any, int]:
    """A chirp with harmonics and a little noise at 16 kHz mono: ``(float32 samples, rate)``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * AUDIO_RATE), dtype=np.float32) / AUDIO_RATE
    base = rng.uniform(180, 320)
    wave = sum(0.3 / k * np.sin(2 * np.pi * k * (base + 60 * t) * t) for k in (1, 2, 3))
    wave = wave + rng.normal(0, 0.01, size=t.shape)
    return wave.astype(np.float32), AUDIO_RATE
