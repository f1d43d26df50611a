"""Soft-token costs of attachments, by Gemma 4's own rules (as vLLM expands the placeholders).

* image: resized (aspect kept) to fit ``max_soft_tokens`` × 3² patches of 16 px, each side a
  multiple of 48 px; one soft token per 48×48 px, capped; plus ``<|image>`` and ``<image|>``.
* audio: 20 ms mel frames every 10 ms, two stride-2 convolutions (≈ 25 tokens a second),
  capped at 750 (30 s); plus ``<|audio>`` and ``<audio|>``.
* video: each sampled frame is an image at 70 soft tokens at most, after its ``mm:ss`` stamp.
"""

from __future__ import annotations

import math

PATCH, POOL = 16, 3
IMAGE_MAX_SOFT_TOKENS = 280
VIDEO_FRAME_MAX_SOFT_TOKENS = 70
AUDIO_RATE = 16000
AUDIO_MAX_TOKENS = 750
MARKERS = 2  # begin and end tokens around each image, audio clip or video frame


def image_soft_tokens(width: int, height: int, max_soft_tokens: int = IMAGE_MAX_SOFT_TOKENS) -> int:
    unit = PATCH * POOL
    max_patches = max_soft_tokens * POOL**2
    scale = math.sqrt(max_patches / ((height / PATCH) * (width / PATCH)))
    target_h = max(unit, int(math.floor(height * scale / unit)) * unit)
    target_w = max(unit, int(math.floor(width * scale / unit)) * unit)
    return min((target_h // PATCH) * (target_w // PATCH) // POOL**2, max_soft_tokens)


def image_tokens(width: int, height: int, max_soft_tokens: int = IMAGE_MAX_SOFT_TOKENS) -> int:
    return image_soft_tokens(width, height, max_soft_tokens) + MARKERS


def audio_soft_tokens(num_samples: int, rate: int = AUDIO_RATE) -> int:
    frame = int(round(rate * 0.020))
    hop = int(round(rate * 0.010))
    mel_frames = (num_samples + frame // 2 - (frame + 1)) // hop + 1
    if mel_frames <= 0:
        return 0
    for _ in range(2):
        mel_frames = (mel_frames - 1) // 2 + 1
    return min(mel_frames, AUDIO_MAX_TOKENS)


def audio_tokens(num_samples: int, rate: int = AUDIO_RATE) -> int:
    return audio_soft_tokens(num_samples, rate) + MARKERS


def video_tokens(width: int, height: int, frames: int) -> int:
    """Soft tokens and markers of the frames (the ``mm:ss`` stamps add a few text tokens each)."""
    return frames * (image_soft_tokens(width, height, VIDEO_FRAME_MAX_SOFT_TOKENS) + MARKERS)
