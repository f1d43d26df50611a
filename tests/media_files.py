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
