"""Video for Gemma 4 (no video tower: vLLM sends sampled frames through the image path).

Frames are sampled evenly (``media.max_video_frames``, default 32) with PyAV and passed as
``(frames [T,H,W,3] uint8, metadata)`` with the ``fps`` and ``frames_indices`` vLLM needs.

Bounded in time and memory whatever the file claims: the duration is measured from the
stream's packets (demuxed, not decoded) and the scan stops at the limit, so a container without
a duration, or with a negative one, is measured, and a 2-hour file is refused after reading
its first ``max_video_minutes``. Only the sampled frames are converted to RGB, each shrunk to at
most ``MAX_SIDE`` pixels (Gemma 4 sees a frame at 70 soft tokens, about 400×400): short clips
are decoded in one pass, long ones by seeking to each sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.config.settings import MediaSettings
from backend.media import audio
from backend.media.attachment import Attachment, AttachmentError, sha256_of
from backend.media.token_costs import video_tokens

MAX_SIDE = 960
SEEK_ABOVE_S = 60.0
"""Longer clips are sampled by seeking (a keyframe, then a few frames) instead of decoding all."""


def _measured_seconds(container: Any, stream: Any, limit_s: float) -> float:
    """The last packet's end time in seconds, scanning no further than ``limit_s`` (+1 s)."""
    base = float(stream.time_base)
    first: float | None = None
    last = 0.0
    for packet in container.demux(stream):
        if packet.pts is None:
            continue
        start = packet.pts * base
        first = start if first is None else min(first, start)
        last = max(last, start + (packet.duration or 0) * base)
        if last - first > limit_s + 1:
            break
    container.seek(0)
    return max(0.0, last - (first or 0.0))


def _small(frame: Any) -> Any:
    """The frame as RGB, its long side at most ``MAX_SIDE``."""
    width, height = frame.width, frame.height
    scale = min(1.0, MAX_SIDE / max(width, height))
    if scale < 1.0:
        size = (max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2))
        return frame.to_ndarray(format="rgb24", width=size[0], height=size[1])
    return frame.to_ndarray(format="rgb24")


def _sequential(container: Any, stream: Any, times: list[float]) -> list[Any]:
    """One decoding pass, converting only the frame at or after each sample time."""
    picked: list[Any] = []
    for frame in container.decode(stream):
        if frame.time is None:
            continue
        while len(picked) < len(times) and frame.time + 1e-6 >= times[len(picked)]:
            picked.append(_small(frame))
        if len(picked) == len(times):
            break
    return picked


def _seeking(container: Any, stream: Any, times: list[float]) -> list[Any]:
    """For each sample time: seek to the keyframe before it, decode up to it."""
    base = float(stream.time_base)
    picked: list[Any] = []
    for moment in times:
        container.seek(int(moment / base), stream=stream, backward=True, any_frame=False)
        chosen = None
        for frame in container.decode(stream):
            chosen = frame
            if frame.time is None or frame.time + 1e-6 >= moment:
                break
        if chosen is not None:
            picked.append(_small(chosen))
    return picked


def load(path: Path, limits: MediaSettings) -> Attachment:
    import av
    import numpy as np

    limit_s = limits.max_video_minutes * 60
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise AttachmentError(
                    f"{path} has no video stream.", "Attach a video file (MP4, WebM, MOV, MKV)."
                )
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            fps = float(stream.average_rate or 25)
            seconds = _measured_seconds(container, stream, limit_s)
            if seconds > limit_s:
                raise AttachmentError(
                    f"{path} runs longer than {audio.duration_text(limit_s)}: over the "
                    f"{limits.max_video_minutes:g}-minute limit.",
                    "Cut a shorter clip, or raise media.max_video_minutes.",
                )
            count = max(1, min(limits.max_video_frames, int(seconds * fps) or 1))
            times = [seconds * i / count for i in range(count)]
            sample = _seeking if seconds > SEEK_ABOVE_S else _sequential
            frames = sample(container, stream, times)
    except av.FFmpegError as error:
        raise AttachmentError(
            f"{path} is not a readable video ({error}).", "Attach MP4, WebM, MOV or MKV."
        ) from None
    if not frames:
        raise AttachmentError(f"{path} has no frames.", "Attach a video with at least one frame.")
    picked: Any = np.stack(frames)
    indices = [round(t * fps) for t in times[: len(frames)]]
    metadata = {
        "fps": fps,
        "frames_indices": indices,
        "total_num_frames": max(int(seconds * fps), len(frames)),
        "duration": seconds or len(frames) / fps,
        "video_backend": "pyav",
    }
    height, width = picked.shape[1:3]
    return Attachment(
        "video",
        path,
        sha256_of(path),
        (picked, metadata),
        video_tokens(width, height, len(frames)),
        f"{audio.duration_text(seconds)}, {len(frames)} frames",
    )


def sound_track(path: Path, limits: MediaSettings) -> Attachment | None:
    """The video's first audio stream as an audio attachment (None if it has none)."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            return None
    return audio.from_decoded(path, audio.decode_with_av(path), limits)
