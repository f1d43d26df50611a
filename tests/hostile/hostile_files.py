"""Hostile files for the bad-input corpus (tests/hostile/test_hostile_inputs.py), made here: images whose
header claims more than the file holds, decompression bombs, WAV headers over sparse or truncated
data, a video without a duration, a history database with a corrupt page."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(path: Path, width: int, height: int) -> Path:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IEND", b""))
    return path


def png_of_zeros(path: Path, width: int, height: int) -> Path:
    """A real, decodable black PNG, compressed row by row (never held whole in memory)."""

    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + width * 3)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")
    )
    return path


def wav_header(path: Path, rate: int, channels: int, data_bytes: int, sparse_to: int = 0) -> Path:
    """A 16-bit PCM WAV header claiming ``data_bytes``; ``sparse_to`` extends the file with zeros."""
    header = (
        b"RIFF"
        + struct.pack("<I", 36 + data_bytes)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * 2, channels * 2, 16)
        + b"data"
        + struct.pack("<I", data_bytes)
    )
    with path.open("wb") as out:
        out.write(header)
        if sparse_to:
            out.truncate(sparse_to)
        else:
            out.write(b"\x00" * data_bytes)
    return path


def tone(path: Path, hz: float, rate: int, seconds: float, channels: int = 1) -> Path:
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    wave = (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)
    soundfile.write(str(path), np.stack([wave] * channels, axis=1), rate)
    return path


def mkv_without_duration(path: Path) -> Path:
    import av

    with av.open(str(path), "w", format="matroska", options={"live": "1"}) as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(20):
            pixels = np.full((48, 64, 3), index * 10, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def truncated_wav(d: Path) -> Path:
    """A header that claims 10 s of sound, followed by 0.6 s of it."""
    path = d / "truncated.wav"
    wav_header(path, 16000, 1, 320_000, sparse_to=44)
    with path.open("ab") as out:
        out.write(b"\x01\x00" * 9600)
    return path


def with_corrupt_page(folder: Path) -> Path:
    from backend.chat.conversation import Conversation
    from backend.chat.store import ChatStore

    folder.mkdir()
    path = folder / "history.db"
    store = ChatStore(path)
    conversation = Conversation(store)
    for index in range(200):
        conversation.add_user(f"message {index} " + "x" * 500)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(path.read_bytes())
    page = 4096
    data[page * 5 : page * 5 + 200] = os.urandom(200)  # a page of the messages table's b-tree
    path.write_bytes(bytes(data))
    return path
