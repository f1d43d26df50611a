"""The bad-input and fault corpus: hostile files, tool-call texts, tool arguments, file names,
config files and a full, locked, read-only, missing or corrupt history — each case generated
here and run in its own forked child (``tests/hostile_worker.py``).

Every case must end in bounded time as expected — refused with a message that names the input
and the reason, or accepted — with no traceback and its peak memory under ``MEMORY_BOUND_MB``
above the worker's own; fault cases also check that nothing the user typed or attached is lost.
The app under the same faults is in ``tests/test_hostile_app.py``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hostile_files import (
    mkv_without_duration,
    png_header_only,
    png_of_zeros,
    tone,
    truncated_wav,
    wav_header,
    with_corrupt_page,
)
from tests.media_files import audio_file, image_file, video_file, video_without_frames

MEMORY_BOUND_MB = 512.0
"""No case may take more than this above the worker's baseline (the worst one is printed)."""
TIME_BOUND_S = 60.0
ROOT = Path(__file__).resolve().parent.parent
DEMO_MODEL = ROOT / "assets" / "demo" / "model"


@dataclass(frozen=True)
class Case:
    id: str
    call: str
    args: list[Any]
    expect: str
    """``refused`` or ``ok``."""
    phrases: tuple[str, ...] = ()
    """Must all appear in the message (the input's name and the reason)."""
    extra: dict[str, Any] = field(default_factory=dict)


# -- hostile files (made by tests/hostile_files.py) ---------------------------------------------


def _media_cases(d: Path) -> Iterator[Case]:
    def attach(id: str, path: Path, expect: str, *phrases: str, limits: dict[str, Any] | None = None) -> Case:
        named = (str(path),) if expect == "refused" else ()  # a refusal names the file
        return Case(id, "tests.hostile_cases:attach", [str(path), limits or {}], expect, (*named, *phrases))

    yield Case(
        "missing file",
        "tests.hostile_cases:attach",
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
        "tests.hostile_cases:attach",
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


# -- tool-call texts, tool arguments, file names ------------------------------------------------

CALL, END, Q = "<|tool_call>call:", "<tool_call|>", '<|"|>'


def _parser_cases() -> Iterator[Case]:
    def call(id: str, text: str, expect: str, *phrases: str) -> Case:
        return Case(id, "tests.hostile_cases:parse_call", [text], expect, phrases)

    yield call(
        "600 nested [", f"{CALL}f{{a:{'[' * 600}{']' * 600}}}{END}", "refused", "nested more than 32 levels"
    )
    yield call(
        "5000 nested {",
        f"{CALL}f{{a:{'{b:' * 5000}1{'}' * 5000}}}{END}",
        "refused",
        "nested more than 32 levels",
    )
    yield call("5000-digit integer", f"{CALL}f{{a:{'9' * 5000}}}{END}", "refused", "5000 digits is too long")
    yield call("float out of range", f"{CALL}f{{a:1e999}}{END}", "refused", "1e999 is out of range")
    yield call("unclosed call", f"{CALL}f{{a:{Q}x", "refused", "cut off before")
    yield call("unterminated string", f"{CALL}f{{a:{Q}x}}{END}", "refused", "a string is not closed")
    yield call("no name", f"{CALL}{{a:1}}{END}", "refused", "no `call:NAME` header")
    yield call("keys of punctuation", f"{CALL}f{{::::}}{END}", "refused", "could not be read")
    yield call("arguments not an object", f"{CALL}f[1,2]{END}", "refused", "must be an object")
    yield call(
        "closing marker inside a string", f"{CALL}f{{a:{Q}}}{END} still text{Q}}}{END}", "ok", "still text"
    )
    yield call("a bare word with spaces", f"{CALL}f{{a:two words}}{END}", "refused", "is not a value")
    yield call("1 MB string", f"{CALL}f{{a:{Q}{'x' * 1_000_000}{Q}}}{END}", "ok", "xxxx")


def _calculator_cases() -> Iterator[Case]:
    def calc(id: str, expression: str, *phrases: str) -> Case:
        return Case(
            id,
            "tests.hostile_cases:calculate",
            [expression],
            "refused",
            (*([expression] if len(expression) < 100 else []), *phrases),
            {"timeout_s": 5},
        )

    yield calc("round to -10**7 digits", "round(2, -10**7)", "out of range")
    yield calc("round to -99999999 digits", "round(2, -99999999)", "out of range")
    yield calc("9**9**9", "9**9**9", "too large")
    yield calc("10**10**10", "10**10**10", "too large")
    yield calc("exp(1000)", "exp(1000)", "math range error")
    yield calc("min() without arguments", "min()", "at least 1 argument")
    yield calc("attribute access", "(1).__class__", "not allowed")
    yield calc("a 600-character expression", "1+" * 300 + "1", "longer than 500")


def _file_cases(d: Path) -> Iterator[Case]:
    root = d / "allowed"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("hello")
    (d / "secret.txt").write_text("secret")
    (root / "out").symlink_to(d / "secret.txt")
    (root / "inside").symlink_to(root / "notes.txt")
    os.mkfifo(root / "pipe")
    (root / "zero").symlink_to("/dev/zero")

    def read(id: str, path: str, expect: str, *phrases: str) -> Case:
        return Case(
            id, "tests.hostile_cases:read_file", [str(root), path], expect, phrases, {"timeout_s": 10}
        )

    yield read("..", "../secret.txt", "refused", "../secret.txt", "outside the allowed directories")
    yield read("an absolute path elsewhere", "/etc/passwd", "refused", "/etc/passwd", "outside")
    yield read("/proc/self/environ", "/proc/self/environ", "refused", "/proc/self/environ", "outside")
    yield read("a symlink out", "out", "refused", "out is outside the allowed directories")
    yield read("a symlink that stays inside", "inside", "ok", "hello")
    yield read("a FIFO inside", "pipe", "refused", "pipe is not a file")
    yield read("a link to /dev/zero", "zero", "refused", "zero is outside")
    yield read("a NUL byte", "a\0b", "refused", "NUL byte")
    yield read("a directory", "sub", "refused", "sub is not a file")
    yield read("missing", "gone.txt", "refused", "gone.txt: no such file")
    odd = d / "odd"
    odd.mkdir()
    (odd / os.fsdecode(b"bad\xffname.txt")).write_text("x")
    yield Case(
        "a file name that is not UTF-8, listed and rendered",
        "tests.hostile_cases:list_and_render",
        [str(odd), str(DEMO_MODEL)],
        "ok",
        ("bad\\\\xffname.txt",),
        {"timeout_s": 60},
    )


def _config_cases(d: Path) -> Iterator[Case]:
    def config(id: str, text: bytes, *phrases: str) -> Case:
        home = d / f"home-{len(list(d.glob('home-*')))}"
        (home / "config").mkdir(parents=True)
        (home / "config" / "config.toml").write_bytes(text)
        return Case(id, "tests.hostile_cases:load_config", [str(home)], "refused", ("config.toml", *phrases))

    yield config(
        "typo in a key",
        b'[tools]\nallowed_dir = ["/srv/safe"]\n',
        "[tools] allowed_dir",
        "Did you mean allowed_dirs",
    )
    yield config("typo in a table", b"[tool]\nenabled = false\n", "[tool]", "Did you mean tools")
    yield config("TOML syntax error", b"max_tokens = [1\n", "not valid TOML")
    yield config("wrong type", b'max_tokens = "many"\n', "max_tokens", "valid integer")
    yield config(
        "value out of range",
        b"[engine]\nmax_model_len = -5\n",
        "engine.max_model_len",
        "greater than or equal to 256",
    )
    yield config("keymap not a table", b"keymap = 3\n", "keymap", "valid dictionary")
    yield config("bytes that are not UTF-8", b"\xff\xfe\x00", "not UTF-8")


# -- the history under fault --------------------------------------------------------------------


def _store_cases(d: Path) -> Iterator[Case]:
    def store(id: str, path: Path, expect: str, *phrases: str) -> Case:
        return Case(id, "tests.hostile_cases:open_store", [str(path)], expect, phrases, {"timeout_s": 30})

    (d / "garbage").mkdir()
    (d / "garbage" / "history.db").write_bytes(os.urandom(8192))
    yield store("garbage database file", d / "garbage" / "history.db", "ok", "moved aside: ", ".corrupt-")
    yield store(
        "missing directory that cannot be made",
        Path("/proc/gemma-chat/history.db"),
        "refused",
        "/proc/gemma-chat",
        "in memory",
    )
    corrupt = with_corrupt_page(d / "corrupt")
    yield store("corrupt page in the messages table", corrupt, "ok", ".corrupt-")
    full = d / "full"
    full.mkdir()
    yield Case(
        "disk full while saving a message with an attachment",
        "tests.hostile_cases:full_disk_then_space",
        [str(full), str(image_file(d / "attached.png"))],
        "ok",
        ("while full: Could not save", "then all saved in order"),
    )
    (d / "locked").mkdir()
    yield Case(
        "database locked by another process during a save",
        "tests.hostile_cases:locked_write",
        [str(d / "locked" / "history.db")],
        "ok",
        ("while locked: Could not save", "database is locked", "then all saved in order"),
    )
    (d / "held").mkdir()
    yield Case(
        "database locked by another process at start (rollback journal)",
        "tests.hostile_cases:locked_at_open",
        [str(d / "held" / "history.db")],
        "refused",
        ("locked by another program", "kept in memory", "not moved aside"),
    )
    for name in ("my#chats", "what?"):
        folder = d / "uri" / name
        folder.mkdir(parents=True)
        yield Case(
            f"search_history in a folder named {name}",
            "tests.hostile_cases:search_history",
            [str(folder)],
            "ok",
            ("1 found",),
        )


def _all_cases(d: Path) -> list[Case]:
    return [
        *_media_cases(d / "media"),
        *_parser_cases(),
        *_calculator_cases(),
        *_file_cases(d / "files"),
        *_config_cases(d / "config"),
        *_store_cases(d / "store"),
    ]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Case, dict[str, Any]]]:
    """Every case run once in the worker: ``id -> (case, result)``."""
    d = tmp_path_factory.mktemp("hostile")
    for folder in ("media", "files", "config", "store"):
        (d / folder).mkdir()
    cases = _all_cases(d)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.hostile_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "GEMMA_CHAT_HOME": str(d / "home")},
    )
    assert worker.stdin is not None and worker.stdout is not None
    results: dict[str, tuple[Case, dict[str, Any]]] = {}
    try:
        for case in cases:
            worker.stdin.write(json.dumps({"call": case.call, "args": case.args, **case.extra}) + "\n")
            worker.stdin.flush()
            results[case.id] = (case, json.loads(worker.stdout.readline()))
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)
    worst = max(results.values(), key=lambda item: item[1]["peak_mb"])
    slowest = max(results.values(), key=lambda item: item[1]["seconds"])
    print(
        f"\nhostile corpus: {len(results)} cases; worst peak memory {worst[1]['peak_mb']:.0f} MB "
        f"({worst[0].id}); slowest {slowest[1]['seconds']:.1f} s ({slowest[0].id})"
    )
    return results


def test_the_corpus_has_at_least_sixty_cases(corpus: dict[str, Any]) -> None:
    assert len(corpus) >= 60, len(corpus)


def _problems(case: Case, result: dict[str, Any]) -> list[str]:
    found = []
    if result["outcome"] in ("hang", "crash"):
        found.append(f"{result['outcome']}: {result['message'][-600:]}")
    elif result["outcome"] != case.expect:
        found.append(f"expected {case.expect}, got {result['outcome']}: {result['message'][:300]}")
    if "Traceback" in result["message"]:
        found.append("a traceback in the message")
    found += [
        f"{phrase!r} missing from {result['message'][:300]!r}"
        for phrase in case.phrases
        if phrase not in result["message"]
    ]
    if result["peak_mb"] >= MEMORY_BOUND_MB:
        found.append(f"peak memory {result['peak_mb']:.0f} MB")
    if result.get("seconds", 0) >= TIME_BOUND_S:
        found.append(f"took {result['seconds']:.0f} s")
    return found


def test_every_case_ends_as_expected_within_its_bounds(
    corpus: dict[str, tuple[Case, dict[str, Any]]],
) -> None:
    failures = [
        f"[{case.id}] {problem}" for case, result in corpus.values() for problem in _problems(case, result)
    ]
    assert not failures, "\n".join(failures)


def test_audio_is_resampled_band_limited(tmp_path: Path) -> None:
    """A 12 kHz tone at 48 kHz is above what 16 kHz audio can hold: it must come out near silence
    (linear interpolation folded it down to 4 kHz at full strength), while a 1 kHz tone stays."""
    from backend.media.load import load_attachment

    def rms(path: Path) -> float:
        samples, rate = load_attachment(path).payload
        assert rate == 16000
        return float(np.sqrt(np.mean(samples[1600:-1600] ** 2)))

    high = rms(tone(tmp_path / "12k.wav", 12_000, 48_000, 1.0))
    low = rms(tone(tmp_path / "1k.wav", 1_000, 48_000, 1.0))
    assert low > 0.3 and high < 0.01 * low, (high, low)


def test_the_failure_report_can_fail() -> None:
    case = Case("probe", "x:y", [], "refused", ("the reason",))
    assert _problems(case, {"outcome": "ok", "message": "", "peak_mb": 0.0, "seconds": 0.0})
    assert _problems(case, {"outcome": "refused", "message": "the reason", "peak_mb": 9e9, "seconds": 0.0})
    assert not _problems(
        case, {"outcome": "refused", "message": "the reason", "peak_mb": 1.0, "seconds": 0.0}
    )


def test_vllm_gemma4_parser_was_run_on_the_corpus_and_does_not_hold() -> None:
    """vLLM ships a Gemma 4 tool-call parser; on this corpus it loses or invents arguments where ours
    parses or refuses with a reason, so gemma-chat keeps its own (tools/gemma_format.py)."""
    from vllm.tool_parsers.gemma4_utils import parse_tool_calls

    from backend.tools.gemma_format import parse_output

    marker_in_string = f"{CALL}f{{a:{Q}}}{END} still text{Q}}}{END}"
    assert parse_tool_calls(marker_in_string)[0]["arguments"] == {"a": ""}, "vLLM cuts the string"
    assert parse_output(marker_in_string).calls[0].arguments == {"a": f"}}{END} still text"}
    unclosed = f"{CALL}f{{a:{Q}x"
    assert parse_tool_calls(unclosed) == [], "vLLM drops the call without a word"
    assert "cut off" in (parse_output(unclosed).calls[0].error or "")
    punctuation = f"{CALL}f{{::::}}{END}"
    assert parse_tool_calls(punctuation)[0]["arguments"] == {"": ":::"}, "vLLM invents an argument"
    assert parse_output(punctuation).calls[0].error
    typed = f"{CALL}f{{n:42,ok:true}}{END}"
    assert parse_tool_calls(typed)[0]["arguments"] == {"n": "42", "ok": "true"}, "vLLM keeps only strings"
    assert parse_output(typed).calls[0].arguments == {"n": 42, "ok": True}
