"""Audio for Gemma 4: WAV, FLAC, OGG, MP3 via soundfile (PyAV for what it cannot read),
mixed to mono and resampled to 16 kHz here (vLLM's own resampler needs torchaudio, which
the CPU build cannot load). Longer than 30 s: trimmed with a notice, or refused (setting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.media.attachment import AUDIO_EXTENSIONS, Attachment, AttachmentError, sha256_of
from backend.media.token_costs import AUDIO_MAX_TOKENS, AUDIO_RATE, audio_tokens
from backend.settings import MediaSettings

MAX_SECONDS = AUDIO_MAX_TOKENS * 0.040  # 30 s


def duration_text(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


def _read(path: Path) -> tuple[Any, int, str]:
    """(samples [n, channels] float32, rate, detected format)."""
    import soundfile

    try:
        info = soundfile.info(str(path))
        samples, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        return samples, int(rate), str(info.format)
    except (RuntimeError, soundfile.LibsndfileError):
        pass
    return decode_with_av(path)


def decode_with_av(path: Path) -> tuple[Any, int, str]:
    """The first audio stream of any container PyAV reads: (samples [n, channels], rate, format)."""
    import av
    import numpy as np

    try:
        with av.open(str(path)) as container:
            stream = container.streams.audio[0]
            chunks: list[Any] = [frame.to_ndarray().astype(np.float32) for frame in container.decode(stream)]
            rate = int(stream.rate)
            fmt = container.format.name.upper()
    except (av.FFmpegError, IndexError, ValueError) as error:
        raise AttachmentError(
            f"{path} is not readable audio ({error}).", "Attach WAV, FLAC, OGG or MP3."
        ) from None
    if not chunks:
        raise AttachmentError(f"{path} has no audio samples.", "Attach a recording with sound in it.")
    planar = np.concatenate(chunks, axis=-1)
    return planar.T if planar.ndim == 2 else planar[:, None], rate, fmt


def to_mono_16k(samples: Any, rate: int) -> Any:
    import numpy as np

    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    if rate == AUDIO_RATE:
        return mono.astype(np.float32)
    duration = len(mono) / rate
    target = np.arange(int(round(duration * AUDIO_RATE))) / AUDIO_RATE
    return np.interp(target, np.arange(len(mono)) / rate, mono).astype(np.float32)


def load(path: Path, limits: MediaSettings) -> Attachment:
    samples, rate, fmt = _read(path)
    expected = AUDIO_EXTENSIONS[path.suffix.lower()]
    if expected not in fmt.upper() and not (expected == "OGG" and "VORBIS" in fmt.upper()):
        raise AttachmentError(
            f"{path}: the content is {fmt}, which does not match its {path.suffix} extension.",
            "Rename it to its real type or re-export it.",
        )
    return from_samples(path, samples, rate, limits)


def from_samples(path: Path, samples: Any, rate: int, limits: MediaSettings) -> Attachment:
    """An audio attachment from decoded samples (a file, or a video's sound track)."""
    if len(samples) == 0:
        raise AttachmentError(f"{path} has no audio samples.", "Attach a recording with sound in it.")
    mono = to_mono_16k(samples, rate)
    seconds = len(mono) / AUDIO_RATE
    notices: tuple[str, ...] = ()
    if seconds > MAX_SECONDS:
        if limits.long_audio == "refuse":
            raise AttachmentError(
                f"{path} is {duration_text(seconds)} long; Gemma 4 hears at most 0:30.",
                "Trim it, or set media.long_audio = 'trim'.",
            )
        mono = mono[: int(MAX_SECONDS * AUDIO_RATE)]
        notices = (
            f"{path.name}: only the first 0:30 of {duration_text(seconds)} is sent (Gemma 4's limit).",
        )
    return Attachment(
        "audio",
        path,
        sha256_of(path),
        (mono, AUDIO_RATE),
        audio_tokens(len(mono)),
        duration_text(min(seconds, MAX_SECONDS)),
        notices,
    )
