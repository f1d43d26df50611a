"""Media files made on the fly for tests: Pillow images, soundfile audio, PyAV video."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def image_file(path: Path, width: int = 160, height: int = 120, fmt: str | None = None) -> Path:
    from PIL import Image

    pixels = (np.random.default_rng(0).random((height, width, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(path, format=fmt)
    return path


def audio_file(path: Path, seconds: float = 2.0, rate: int = 44100, channels: int = 2) -> Path:
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 440 * t)
    soundfile.write(str(path), np.stack([tone] * channels, axis=1), rate)
    return path


def video_file(path: Path, seconds: float = 2.0, fps: int = 10, size: tuple[int, int] = (96, 64)) -> Path:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4" if path.suffix != ".webm" else "libvpx", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(int(seconds * fps)):
            frame = np.full((size[1], size[0], 3), (index * 12) % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def video_with_sound(path: Path, seconds: float = 2.0, fps: int = 8) -> Path:
    import av

    with av.open(str(path), "w") as container:
        video = container.add_stream("mpeg4", rate=fps)
        video.width, video.height, video.pix_fmt = 96, 64, "yuv420p"
        sound = container.add_stream("aac", rate=16000)
        sound.layout = "mono"
        for index in range(int(seconds * fps)):
            pixels = np.full((64, 96, 3), index * 10 % 255, np.uint8)
            for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        wave = (0.3 * np.sin(2 * np.pi * 440 * np.arange(int(seconds * 16000)) / 16000)).astype(np.float32)
        for start in range(0, len(wave), 1024):
            frame = av.AudioFrame.from_ndarray(wave[None, start : start + 1024], format="fltp", layout="mono")
            frame.sample_rate = 16000
            for packet in sound.encode(frame):
                container.mux(packet)
        for stream in (video, sound):
            for packet in stream.encode():
                container.mux(packet)
    return path


def video_without_frames(path: Path) -> Path:
    """An MP4 that holds only sound: no picture frames at all."""
    import av

    with av.open(str(path), "w") as container:
        sound = container.add_stream("aac", rate=16000)
        sound.layout = "mono"
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 16000
        for packet in [*sound.encode(frame), *sound.encode()]:
            container.mux(packet)
    return path
