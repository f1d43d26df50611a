"""Video for Gemma 4 (no video tower: vLLM sends sampled frames through the image path).

Frames are sampled evenly (``media.max_video_frames``, default 32) with PyAV and passed as
``(frames [T,H,W,3] uint8, metadata)`` with the ``fps`` and ``frames_indices`` vLLM needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.media.attachment import Attachment, AttachmentError, sha256_of
from backend.media.audio import duration_text
from backend.media.token_costs import video_tokens
from backend.settings import MediaSettings


def _sample_indices(total: int, wanted: int) -> list[int]:
    if total <= wanted:
        return list(range(total))
    return [int(i * total / wanted) for i in range(wanted)]


def load(path: Path, limits: MediaSettings) -> Attachment:
    import av
    import numpy as np

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise AttachmentError(
                    f"{path} has no video stream.", "Attach a video file (MP4, WebM, MOV, MKV)."
                )
            stream = container.streams.video[0]
            fps = float(stream.average_rate or 25)
            seconds = float(container.duration / 1e6) if container.duration else 0.0
            if seconds > limits.max_video_minutes * 60:
                limit = f"{limits.max_video_minutes:g}-minute"
                raise AttachmentError(
                    f"{path} is {duration_text(seconds)} long, over the {limit} limit.",
                    "Cut a shorter clip, or raise media.max_video_minutes.",
                )
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
    except av.FFmpegError as error:
        raise AttachmentError(
            f"{path} is not a readable video ({error}).", "Attach MP4, WebM, MOV or MKV."
        ) from None
    if not frames:
        raise AttachmentError(f"{path} has no frames.", "Attach a video with at least one frame.")
    indices = _sample_indices(len(frames), limits.max_video_frames)
    picked: Any = np.stack([frames[i] for i in indices])
    seconds = seconds or len(frames) / fps
    metadata = {
        "fps": fps,
        "frames_indices": indices,
        "total_num_frames": len(frames),
        "duration": seconds,
        "video_backend": "pyav",
    }
    height, width = picked.shape[1:3]
    return Attachment(
        "video",
        path,
        sha256_of(path),
        (picked, metadata),
        video_tokens(width, height, len(indices)),
        f"{duration_text(seconds)}, {len(indices)} frames",
    )


def sound_track(path: Path, limits: MediaSettings) -> Attachment | None:
    """The video's first audio stream as an audio attachment (None if it has none)."""
    import av

    from backend.media import audio

    with av.open(str(path)) as container:
        if not container.streams.audio:
            return None
    samples, rate, _ = audio.decode_with_av(path)
    return audio.from_samples(path, samples, rate, limits)
