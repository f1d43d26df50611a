"""Audio for Gemma 4: WAV, FLAC, OGG, MP3 via soundfile (PyAV for what it cannot read), mixed to
mono and resampled to 16 kHz here (vLLM's own resampler needs torchaudio, which the CPU build
cannot load). Longer than 30 s: trimmed with a notice, or refused (setting).

Decoding streams and stops just past the 30 s Gemma 4 hears, mixing to mono block by block, so a
2 GB file or one with a thousand channels costs what 30 s of one channel costs. The resampler is
soxr's band-limited one: a 44.1/48 kHz recording keeps nothing above 8 kHz folded into the band
the model hears. Sample rates outside ``RATES`` are refused (a 1 Hz "WAV" is not audio).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.config.settings import MediaSettings
from backend.media.attachment import AUDIO_EXTENSIONS, Attachment, AttachmentError, sha256_of
from backend.media.token_costs import AUDIO_MAX_TOKENS, AUDIO_RATE, audio_tokens

MAX_SECONDS = AUDIO_MAX_TOKENS * 0.040  # 30 s
RATES = (4000, 384000)
"""Sample rates accepted, in Hz."""
MAX_CHANNELS = 64
BLOCK_SECONDS = 1.0


@dataclass(frozen=True)
class Decoded:
    """Up to ``MAX_SECONDS`` (and a little more) of mono audio at its own rate."""

    mono: Any
    rate: int
    format: str
    seconds: float | None
    """The whole recording's length where the container says it (and it is plausible)."""


def duration_text(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    whole = max(0, int(round(seconds)))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _check_rate(path: Path, rate: int, channels: int) -> None:
    if not RATES[0] <= rate <= RATES[1]:
        raise AttachmentError(
            f"{path} has a sample rate of {rate} Hz; audio is {RATES[0] // 1000}–{RATES[1] // 1000} kHz.",
            "Re-export it at a common rate (16, 44.1 or 48 kHz).",
        )
    if not 1 <= channels <= MAX_CHANNELS:
        raise AttachmentError(
            f"{path} has {channels} channels (at most {MAX_CHANNELS}).", "Mix it down to mono or stereo."
        )


def _mono(blocks: Iterator[Any], rate: int) -> Any:
    """Mixes ``[n, channels]`` blocks to mono until just past ``MAX_SECONDS``."""
    import numpy as np

    wanted = int((MAX_SECONDS + BLOCK_SECONDS) * rate)
    parts: list[Any] = []
    have = 0
    for block in blocks:
        mono = block.mean(axis=1, dtype=np.float32) if block.ndim == 2 else block.astype(np.float32)
        parts.append(mono[: wanted - have])
        have += len(parts[-1])
        if have >= wanted:
            break
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def _with_soundfile(path: Path) -> Decoded | None:
    import soundfile

    try:
        with soundfile.SoundFile(str(path)) as sound:
            rate, channels = int(sound.samplerate), int(sound.channels)
            _check_rate(path, rate, channels)
            block = max(1, int(rate * BLOCK_SECONDS))
            mono = _mono(sound.blocks(blocksize=block, dtype="float32", always_2d=True), rate)
            frames = int(sound.frames)
            return Decoded(mono, rate, str(sound.format), frames / rate if frames > 0 else None)
    except (RuntimeError, soundfile.LibsndfileError):
        return None


def decode_with_av(path: Path) -> Decoded:
    """The first audio stream of any container PyAV reads (a file's, or a video's sound track)."""
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.audio[0]
            rate, channels = int(stream.rate or 0), int(stream.channels or 0)
            _check_rate(path, rate, channels)
            mono = _mono(_mono_frames(container, stream), rate)
            seconds = container.duration / 1e6 if container.duration and container.duration > 0 else None
            fmt = container.format.name.upper()
    except (av.FFmpegError, IndexError, ValueError, OSError) as error:
        raise AttachmentError(
            f"{path} is not readable audio ({error}).", "Attach WAV, FLAC, OGG or MP3."
        ) from None
    return Decoded(mono, rate, fmt, seconds)


def _mono_frames(container: Any, stream: Any) -> Iterator[Any]:
    """The stream's frames as mono float32 at its own rate (FFmpeg's resampler does the downmix)."""
    import av

    mixer = av.AudioResampler(format="flt", layout="mono", rate=stream.rate)
    for frame in container.decode(stream):
        for mixed in mixer.resample(frame):
            yield mixed.to_ndarray()[0]


def resample_16k(mono: Any, rate: int) -> Any:
    """Band-limited resampling to Gemma 4's 16 kHz."""
    import numpy as np

    if rate == AUDIO_RATE:
        return mono.astype(np.float32)
    import soxr

    return soxr.resample(mono.astype(np.float32), rate, AUDIO_RATE, quality="HQ").astype(np.float32)


def load(path: Path, limits: MediaSettings) -> Attachment:
    decoded = _with_soundfile(path) or decode_with_av(path)
    expected = AUDIO_EXTENSIONS[path.suffix.lower()]
    fmt = decoded.format.upper()
    if expected not in fmt and not (expected == "OGG" and "VORBIS" in fmt):
        raise AttachmentError(
            f"{path}: the content is {decoded.format}, which does not match its {path.suffix} extension.",
            "Rename it to its real type or re-export it.",
        )
    return from_decoded(path, decoded, limits)


def from_decoded(path: Path, decoded: Decoded, limits: MediaSettings) -> Attachment:
    """An audio attachment from decoded sound (a file's, or a video's sound track)."""
    if len(decoded.mono) == 0:
        raise AttachmentError(f"{path} has no audio samples.", "Attach a recording with sound in it.")
    measured = len(decoded.mono) / decoded.rate
    long = measured > MAX_SECONDS
    seconds = max(decoded.seconds or 0.0, measured) if long else measured
    mono = decoded.mono[: int(MAX_SECONDS * decoded.rate)] if long else decoded.mono
    notices: tuple[str, ...] = ()
    if long:
        length = duration_text(seconds) if decoded.seconds else "more than 0:30"
        if limits.long_audio == "refuse":
            raise AttachmentError(
                f"{path} is {length} long; Gemma 4 hears at most 0:30.",
                "Trim it, or set media.long_audio = 'trim'.",
            )
        notices = (f"{path.name}: only the first 0:30 of {length} is sent (Gemma 4's limit).",)
    samples = resample_16k(mono, decoded.rate)
    return Attachment(
        "audio",
        path,
        sha256_of(path),
        (samples, AUDIO_RATE),
        audio_tokens(len(samples)),
        duration_text(min(seconds, MAX_SECONDS)),
        notices,
    )
