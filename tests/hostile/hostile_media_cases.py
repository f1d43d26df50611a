"""Hostile media files for the corpus (made by ``tests/hostile/hostile_files.py``): corrupt, truncated,
bombs, endless, empty."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tests.hostile.hostile_case import Case
from tests.hostile.hostile_files import (
    mkv_without_duration,
    png_header_only,
    png_of_zeros,
    tone,
    truncated_wav,
    wav_header,
)
from tests.support.media_files import audio_file, image_file, video_file, video_without_frames


def media_cases(d: Path) -> Iterator[Case]:
    def attach(id: str, path: Path, expect: str, *phrases: str, limits: dict[str, Any] | None = None) -> Case:
        named = (str(path),) if expect == "refused" else ()  # a refusal names the file
        return Case(
            id, "tests.hostile.hostile_cases:attach", [str(path), limits or {}], expect, (*named, *phrases)
        )

    yield Case(
        "missing file",
        "tests.hostile.hostile_cases:attach",
        [str(d / "nope.png")],
        "refused",
        ("nope.png", "no such file"),
    )
    (d / "folder.png").mkdir()
    yield attach("a directory", d / "folder.png", "refused", "is a directory")
    (d / "empty.png").write_bytes(b"")
    yield attach("zero bytes", d / "empty.png", "refused", "empty (0 bytes)")
    os.mkfifo(d / "pipe.wav")
    yield attach("a FIFO named .wav", d / "pipe.wav", "refused", "FIFO")
    (d / "zero.wav").symlink_to("/dev/zero")
    yield attach("a link to /dev/zero", d / "zero.wav", "refused", "character device")
    yield Case(
        "a NUL in the path",
        "tests.hostile.hostile_cases:attach",
        [str(d / "a\0b.png")],
        "refused",
        ("a\\x00b.png", "cannot be read"),
    )
    (d / "notes.txt").write_text("text")
    yield attach("unsupported type", d / "notes.txt", "refused", ".txt is not a supported type")
    image_file(d / "real.png")
    (d / "mislabelled.jpg").write_bytes((d / "real.png").read_bytes())
    yield attach("PNG named .jpg", d / "mislabelled.jpg", "refused", "the content is PNG")
    (d / "truncated.png").write_bytes((d / "real.png").read_bytes()[:300])
    yield attach("truncated PNG", d / "truncated.png", "refused", "not a readable image")
    (d / "garbage.png").write_bytes(os.urandom(4096))
    yield attach("garbage bytes as PNG", d / "garbage.png", "refused", "not a readable image")
    yield attach(
        "370-byte PNG claiming 100000x100000",
        png_header_only(d / "bomb.png", 100_000, 100_000),
        "refused",
        "megapixel limit",
    )
    yield attach("13000x13000 PNG", png_of_zeros(d / "big.png", 13_000, 13_000), "refused", "megapixel limit")
    yield attach(
        "7000x7000 PNG (49 MP, accepted)", png_of_zeros(d / "large.png", 7_000, 7_000), "ok", "2048x2048"
    )
    image_file(d / "photo.jpg", 6000, 4000)
    yield attach("24 MP JPEG (decoded at a reduced scale)", d / "photo.jpg", "ok", "2048x1365")
    with (d / "padded.png").open("wb") as out:
        out.write((d / "real.png").read_bytes())
        out.truncate(25_000_000)
    yield attach("25 MB image file", d / "padded.png", "refused", "over the 20 MB image limit")
    yield attach(
        "image limit lowered",
        d / "real.png",
        "refused",
        "megapixel limit",
        limits={"max_image_megapixels": 0.001},
    )
    frames = [np.full((20, 20, 3), v, np.uint8) for v in (0, 255)]
    from PIL import Image

    Image.fromarray(frames[0]).save(d / "anim.gif", save_all=True, append_images=[Image.fromarray(frames[1])])
    yield attach("animated GIF (first frame)", d / "anim.gif", "ok", "20x20")
    (d / "header.bmp").write_bytes(
        b"BM"
        + struct.pack("<IHHI", 70, 0, 0, 54)
        + struct.pack("<IiiHHIIiiII", 40, 60000, 60000, 1, 24, 0, 0, 0, 0, 0, 0)
    )
    yield attach("BMP header claiming 60000x60000", d / "header.bmp", "refused", "megapixel limit")

    yield attach(
        "WAV at 1 Hz (6 KB)", wav_header(d / "1hz.wav", 1, 1, 6000), "refused", "sample rate of 1 Hz"
    )
    yield attach(
        "WAV at 1 Hz (400 KB)",
        wav_header(d / "1hz-big.wav", 1, 1, 400_000),
        "refused",
        "sample rate of 1 Hz",
    )
    yield attach(
        "2 GB WAV (sparse)",
        wav_header(d / "huge.wav", 16000, 1, 2_000_000_000, sparse_to=2_000_000_044),
        "ok",
        "0:30",
        "only the first 0:30",
    )
    yield attach("WAV header longer than its data", truncated_wav(d), "ok", "0:01")
    yield attach(
        "WAV with 100 channels", wav_header(d / "channels.wav", 16000, 100, 3200), "refused", "100 channels"
    )
    yield attach(
        "8 channels at 48 kHz, 40 s",
        tone(d / "surround.wav", 440, 48000, 40, channels=8),
        "ok",
        "only the first 0:30",
    )
    yield attach(
        "long audio refused by setting",
        d / "surround.wav",
        "refused",
        "hears at most 0:30",
        limits={"long_audio": "refuse"},
    )
    (d / "garbage.wav").write_bytes(os.urandom(4096))
    yield attach("garbage bytes as WAV", d / "garbage.wav", "refused", "not readable audio")
    audio_file(d / "voice.wav", seconds=1.0)
    (d / "voice.mp3").write_bytes((d / "voice.wav").read_bytes())
    yield attach("WAV named .mp3", d / "voice.mp3", "refused", "does not match its .mp3 extension")
    import soundfile

    soundfile.write(str(d / "voice.flac"), np.zeros((16000, 1), np.float32), 16000)
    (d / "voice.ogg").write_bytes((d / "voice.flac").read_bytes())
    yield attach("FLAC named .ogg", d / "voice.ogg", "refused", "does not match its .ogg extension")
    yield attach("FLAC, 1 s", d / "voice.flac", "ok", "0:01")

    yield attach(
        "MP4 with sound only", video_without_frames(d / "nopicture.mp4"), "refused", "no video stream"
    )
    (d / "garbage.mp4").write_bytes(os.urandom(8192))
    yield attach("garbage bytes as MP4", d / "garbage.mp4", "refused", "not a readable video")
    video_file(d / "clip.mp4", seconds=2.0)
    (d / "cut.mp4").write_bytes((d / "clip.mp4").read_bytes()[:600])
    yield attach("truncated MP4", d / "cut.mp4", "refused", str(d / "cut.mp4"))
    yield attach(
        "60 s 640x360 MP4",
        video_file(d / "minute.mp4", seconds=60.0, fps=10, size=(640, 360)),
        "ok",
        "1:00, 32 frames",
    )
    yield attach("MKV without a duration", mkv_without_duration(d / "live.mkv"), "ok", "0:02", "frames")
    yield attach(
        "video over the length limit",
        d / "minute.mp4",
        "refused",
        "over the 0.5-minute limit",
        limits={"max_video_minutes": 0.5},
    )
    yield attach(
        "1080p video (frames shrunk)",
        video_file(d / "hd.mp4", seconds=1.0, fps=4, size=(1920, 1080)),
        "ok",
        "0:01, 4 frames",
    )
