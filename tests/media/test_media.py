"""Attachments: loading every supported kind, token costs, and every validation case."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend.config.settings import MediaSettings
from backend.media.attachment import AttachmentError
from backend.media.load import load_attachment
from backend.media.token_costs import audio_soft_tokens, image_soft_tokens
from tests.hostile.hostile_files import tone
from tests.support.media_files import audio_file, image_file, video_file


@pytest.mark.parametrize(
    ("name", "fmt"), [("a.png", None), ("a.jpg", None), ("a.webp", None), ("a.gif", None), ("a.bmp", None)]
)
def test_images_of_every_format_load_as_rgb(tmp_path: Path, name: str, fmt: str | None) -> None:
    attachment = load_attachment(image_file(tmp_path / name, fmt=fmt))
    assert attachment.kind == "image" and attachment.payload.mode == "RGB"
    assert attachment.detail == "160x120" and attachment.tokens == image_soft_tokens(160, 120) + 2
    assert len(attachment.sha256) == 64


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    from PIL import Image

    path = image_file(tmp_path / "rotated.jpg", width=200, height=100)
    image = Image.open(path)
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise when shown
    image.save(path, exif=exif)
    assert load_attachment(path).payload.size == (100, 200)


def test_audio_is_mono_16k_with_its_cost(tmp_path: Path) -> None:
    attachment = load_attachment(audio_file(tmp_path / "a.wav", seconds=2.0, rate=44100, channels=2))
    samples, rate = attachment.payload
    assert rate == 16000 and samples.ndim == 1 and abs(len(samples) - 32000) <= 1
    assert attachment.tokens == audio_soft_tokens(len(samples)) + 2 and attachment.detail == "0:02"
    assert 48 <= audio_soft_tokens(32000) <= 52  # ~25 tokens a second


@pytest.mark.parametrize("suffix", [".flac", ".ogg"])
def test_other_audio_containers(tmp_path: Path, suffix: str) -> None:
    attachment = load_attachment(audio_file(tmp_path / f"a{suffix}", seconds=1.0, rate=16000, channels=1))
    assert attachment.kind == "audio" and attachment.detail == "0:01"


def test_long_audio_is_trimmed_or_refused(tmp_path: Path) -> None:
    path = audio_file(tmp_path / "long.wav", seconds=40.0, rate=16000, channels=1)
    trimmed = load_attachment(path)
    assert len(trimmed.payload[0]) == 30 * 16000 and trimmed.notices and "0:30" in trimmed.notices[0]
    with pytest.raises(AttachmentError, match="at most 0:30"):
        load_attachment(path, MediaSettings(long_audio="refuse"))


def test_video_frames_are_sampled_with_metadata(tmp_path: Path) -> None:
    attachment = load_attachment(
        video_file(tmp_path / "v.mp4", seconds=5.0, fps=10), MediaSettings(max_video_frames=8)
    )
    frames, metadata = attachment.payload
    assert frames.shape == (8, 64, 96, 3)
    assert (
        metadata["fps"] == 10 and len(metadata["frames_indices"]) == 8 and metadata["total_num_frames"] == 50
    )
    assert attachment.detail == "0:05, 8 frames"


def _refused(path: Path, reason: str, limits: MediaSettings | None = None) -> None:
    with pytest.raises(AttachmentError) as caught:
        load_attachment(path, limits)
    assert str(path) in str(caught.value) and reason in str(caught.value)


def test_validation_messages(tmp_path: Path) -> None:
    _refused(tmp_path / "missing.png", "no such file")
    _refused(tmp_path, "is a directory")
    (tmp_path / "empty.png").write_bytes(b"")
    _refused(tmp_path / "empty.png", "empty (0 bytes)")
    (tmp_path / "notes.txt").write_text("hello")
    _refused(tmp_path / "notes.txt", "not a supported type")
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 20)
    _refused(tmp_path / "corrupt.png", "not a readable image")
    image_file(tmp_path / "real.jpg")
    (tmp_path / "real.jpg").rename(tmp_path / "lying.png")
    _refused(tmp_path / "lying.png", "content is JPEG, which does not match its .png extension")
    image_file(tmp_path / "big.png", width=400, height=400)
    _refused(tmp_path / "big.png", "over the 0.01 MB image limit", MediaSettings(max_image_mb=0.01))
    (tmp_path / "broken.wav").write_bytes(b"RIFF" + b"\x00" * 64)
    _refused(tmp_path / "broken.wav", "not readable audio")
    (tmp_path / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64)
    _refused(tmp_path / "broken.mp4", "not a readable video")
    video_file(tmp_path / "long.mp4", seconds=3.0, fps=5)
    _refused(tmp_path / "long.mp4", "over the 0.01-minute limit", MediaSettings(max_video_minutes=0.01))


def test_video_sound_track_is_attached_when_the_setting_says_so(tmp_path: Path) -> None:
    from backend.media.load import load_attachments
    from tests.support.media_files import video_with_sound

    path = video_with_sound(tmp_path / "talk.mp4", seconds=2.0)
    assert [a.kind for a in load_attachments(path)] == ["video"]
    both = load_attachments(path, MediaSettings(video_audio=True))
    assert [a.kind for a in both] == ["video", "audio"]
    samples, rate = both[1].payload
    assert rate == 16000 and 1.8 < len(samples) / rate < 2.2


def test_video_without_frames_is_refused(tmp_path: Path) -> None:
    from tests.support.media_files import video_without_frames

    path = video_without_frames(tmp_path / "sound-only.mp4")
    with pytest.raises(AttachmentError) as caught:
        load_attachment(path)
    assert str(path) in str(caught.value) and "has no video stream" in str(caught.value)


def test_audio_is_resampled_band_limited(tmp_path: Path) -> None:
    """A 12 kHz tone at 48 kHz is above what 16 kHz audio can hold: it must come out near silence
    (linear interpolation folded it down to 4 kHz at full strength), while a 1 kHz tone stays."""

    def rms(path: Path) -> float:
        samples, rate = load_attachment(path).payload
        assert rate == 16000
        return float(np.sqrt(np.mean(samples[1600:-1600] ** 2)))

    high = rms(tone(tmp_path / "12k.wav", 12_000, 48_000, 1.0))
    low = rms(tone(tmp_path / "1k.wav", 1_000, 48_000, 1.0))
    assert low > 0.3 and high < 0.01 * low, (high, low)
