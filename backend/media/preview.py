"""What an attachment looks like before and after it is sent, from what was decoded to send it:
an image as itself, a video as its first frame, audio as a waveform line (its loudness over
time in block characters). UI-free: the app draws these (``app/tui/widgets/preview.py``)."""

from __future__ import annotations

from typing import Any

from backend.media.attachment import Attachment

LEVELS = "▁▂▃▄▅▆▇█"
"""The waveform's characters, quietest first."""


def still(attachment: Attachment) -> Any | None:
    """The picture to show for ``attachment`` (a PIL image in RGB): the image itself, a video's
    first frame; None for audio (or a payload that holds no picture)."""
    from PIL import Image

    if attachment.kind == "image" and isinstance(attachment.payload, Image.Image):
        return attachment.payload
    if attachment.kind == "video":
        frames = attachment.payload[0] if isinstance(attachment.payload, tuple) else None
        if frames is not None and len(frames):
            return Image.fromarray(frames[0]).convert("RGB")
    return None


def waveform(samples: Any, columns: int) -> str:
    """``samples`` (mono, any length) as ``columns`` block characters, each the loudest sample
    (peak) of its stretch against the loudest of all; silence is the lowest block."""
    import numpy as np

    values = np.abs(np.asarray(samples, dtype=np.float32).ravel())
    if columns < 1 or values.size == 0:
        return ""
    columns = min(columns, values.size)
    peaks = np.array([part.max() for part in np.array_split(values, columns)])
    top = float(peaks.max())
    if top <= 0.0:
        return LEVELS[0] * columns
    steps = np.minimum((peaks / top * len(LEVELS)).astype(int), len(LEVELS) - 1)
    return "".join(LEVELS[int(step)] for step in steps)


def audio_samples(attachment: Attachment) -> Any | None:
    """The audio's samples as sent (16 kHz mono), or None for another kind."""
    if attachment.kind != "audio" or not isinstance(attachment.payload, tuple):
        return None
    return attachment.payload[0]
