"""Seeing what you attach (issue 65, item 5): an image as a picture above the message box and in
the sent message — Kitty graphics (Unicode placeholders) where the terminal draws them,
half-blocks elsewhere and in tmux — a video as its first frame, audio as its duration and a
waveform line. On Textual's own renderer (Pilot) and on a pty."""

from __future__ import annotations

import base64
import io
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.tui import graphics
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.preview import Picture
from backend.config.settings import MediaSettings, Settings
from backend.config.settings_env import unknown_variables
from backend.media.load import load_attachments
from backend.media.preview import LEVELS, still, waveform
from tests.support.media_files import audio_file, video_file
from tests.support.terminal import Terminal
from tests.support.tui_pilot import make_app, send, wait_until

ROOT = Path(__file__).resolve().parents[3]
RED, GREEN, BLUE, YELLOW = (220, 40, 40), (40, 200, 60), (40, 80, 230), (240, 220, 30)


def quadrants(path: Path) -> Path:
    """A 160x120 PNG in four coloured quarters (red, green over blue, yellow)."""
    pixels = np.zeros((120, 160, 3), np.uint8)
    pixels[:60, :80], pixels[:60, 80:], pixels[60:, :80], pixels[60:, 80:] = RED, GREEN, BLUE, YELLOW
    Image.fromarray(pixels).save(path)
    return path


def test_the_terminal_is_detected_and_tmux_gets_half_blocks() -> None:
    assert graphics.detect({"TERM": "xterm-kitty"}) == "kitty"
    assert graphics.detect({"TERM": "xterm-256color", "KITTY_WINDOW_ID": "1"}) == "kitty"
    assert graphics.detect({"TERM": "xterm-ghostty"}) == "kitty"
    assert graphics.detect({"TERM": "xterm-256color"}) == "halfblocks"
    assert graphics.detect({"TERM": "foot", "TERM_PROGRAM": "WezTerm"}) == "halfblocks", "Sixel is not drawn"
    assert (
        graphics.detect({"TERM": "tmux-256color", "KITTY_WINDOW_ID": "1", "TMUX": "/tmp/t,1,0"})
        == "halfblocks"
    )
    assert graphics.detect({"TERM": "screen", "KITTY_WINDOW_ID": "1"}) == "halfblocks"
    assert graphics.detect({"TERM": "xterm", graphics.OVERRIDE: "kitty"}) == "kitty"
    assert graphics.detect({"TERM": "xterm-kitty", graphics.OVERRIDE: "halfblocks"}) == "halfblocks"
    assert unknown_variables(Settings, "GEMMA_CHAT_", {graphics.OVERRIDE: "kitty"}) == [], "not refused"


def test_kitty_placeholders_name_each_cell_and_the_image_by_colour() -> None:
    text = graphics.placeholders(0x0A0B0C, 3, 2)
    assert graphics.placeholder_cells(text.plain) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert text.plain.count("\n") == 1 and str(text.style) == "#0a0b0c"
    with pytest.raises(ValueError, match="1 to 48 cells"):
        graphics.placeholders(1, 49, 1)


def test_kitty_transmission_is_a_png_in_chunks_placed_virtually() -> None:
    noise = (np.random.default_rng(0).random((900, 1200, 3)) * 255).astype(np.uint8)
    sequence = graphics.transmit(Image.fromarray(noise), 77, 32, 12)
    parts = re.findall(r"\x1b_G([^;]*);([^\x1b]*)\x1b\\", sequence)
    assert len(parts) > 1 and all(len(data) <= graphics.CHUNK for _, data in parts)
    assert parts[0][0] == "a=T,U=1,f=100,t=d,q=2,i=77,c=32,r=12,m=1"
    assert [keys for keys, _ in parts[1:]] == ["m=1"] * (len(parts) - 2) + ["m=0"]
    png = Image.open(io.BytesIO(base64.b64decode("".join(data for _, data in parts))))
    assert png.format == "PNG" and max(png.size) == graphics.SENT_SIDE


def test_cells_keep_the_proportions() -> None:
    assert graphics.cells(160, 120, 32, 8) == (21, 8), "8 rows are 16 pixels tall: 21 across"
    assert graphics.cells(1000, 100, 32, 8) == (32, 2)


def test_waveform_follows_the_loudness() -> None:
    assert waveform(np.zeros(1000), 10) == LEVELS[0] * 10
    ramp = waveform(np.linspace(0, 1, 8000), 8)
    assert len(ramp) == 8 and list(ramp) == sorted(ramp) and ramp[-1] == LEVELS[-1]
    assert waveform(np.ones(3), 10) == LEVELS[-1] * 3
    assert waveform(np.array([]), 10) == ""


def test_a_videos_still_is_its_first_frame(tmp_path: Path) -> None:
    (video,) = load_attachments(video_file(tmp_path / "clip.mp4", size=(96, 64)), MediaSettings())
    frame = still(video)
    assert frame is not None and frame.size == (96, 64)
    assert np.asarray(frame).max() < 16, "the test video's first frame is black (then it brightens)"


def colours(text: Any) -> set[str]:
    return {
        span.style.color.triplet.hex for span in text.spans if span.style.color and span.style.color.triplet
    }


async def attach(app: Any, pilot: Any, *paths: Path) -> None:
    for path in paths:
        app.attach(path)
        await wait_until(pilot, lambda p=path: any(a.path == p for a in app.pending))


async def test_half_blocks_above_the_message_box_and_in_the_message(tmp_path: Path) -> None:
    image = quadrants(tmp_path / "quad.png")
    voice = audio_file(tmp_path / "voice.wav", seconds=1.0)
    clip = video_file(tmp_path / "clip.mp4")
    app, _ = make_app(tmp_path)
    app.graphics = "halfblocks"
    async with app.run_test(size=(100, 40)) as pilot:
        await attach(app, pilot, image, voice)
        # the video is read here, not in the app's worker thread: that thread outlives the test (the
        # session's loop keeps it), and PyAV's scaler it keeps deadlocks a child the pty tests fork
        (video,) = load_attachments(clip, MediaSettings())
        await app._add_pending(video)
        bar = app.query_one(AttachmentBar)
        pictures = list(bar.query(Picture))
        assert len(pictures) == 2, "the image and the video's first frame"
        drawn = pictures[0].drawing
        assert "▀" in drawn.plain and {"#dc2828", "#28c83c", "#2850e6", "#f0dc1e"} <= colours(drawn)
        (wave,) = bar.query(".waveform")
        assert str(wave.render()).startswith("♪ 0:01 ") and LEVELS[-1] in str(wave.render())
        await send(app, pilot, "What is this?")
        (mine,) = [v for v in app.query(MessageView) if v.role == "user"]
        shown = list(mine.query(Picture))
        assert [p.drawn_with for p in shown] == ["halfblocks", "halfblocks"]
        await pilot.pause()
        lines = shown[0].drawing.plain.splitlines()
        assert len(lines) == 8 and {len(line) for line in lines} == {21}, "160x120 in 32x8 cells at most"
        assert shown[0].size == (21, 8)
        assert len(mine.query(".waveform")) == 1


async def test_kitty_graphics_send_the_picture_and_draw_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLORTERM", "truecolor")  # as kitty and Ghostty set it: the id is a 24-bit colour
    image = quadrants(tmp_path / "quad.png")
    app, _ = make_app(tmp_path)
    app.graphics = "kitty"
    async with app.run_test(size=(100, 40)) as pilot:
        written: list[str] = []
        driver_write = app._driver.write  # type: ignore[union-attr]
        app._driver.write = lambda data: (written.append(data), driver_write(data))  # type: ignore[union-attr, method-assign]
        await attach(app, pilot, image)
        await pilot.pause()
        (picture,) = app.query_one(AttachmentBar).query(Picture)
        assert picture.drawn_with == "kitty" and picture.image_id is not None
        sent = "".join(written)
        assert f"\x1b_Ga=T,U=1,f=100,t=d,q=2,i={picture.image_id},c=13,r=5" in sent
        cells = graphics.placeholder_cells(picture.drawing.plain)
        assert len(cells) == 13 * 5 and cells[-1] == (4, 12)
        await pilot.click("#chip-0")  # removed: the terminal frees the picture
        await wait_until(pilot, lambda: not app.pending)
        assert graphics.delete(picture.image_id) in "".join(written)


def attach_on_a_pty(tmp_path: Path, env_extra: dict[str, str]) -> Terminal:
    image = quadrants(tmp_path / "quad.png")
    env = {**os.environ, "GEMMA_CHAT_HOME": str(tmp_path), "TERM": "xterm-256color", **env_extra}
    for name in ("TMUX", "KITTY_WINDOW_ID", "TERM_PROGRAM", "COLORTERM", graphics.OVERRIDE):
        if name not in env_extra:
            env.pop(name, None)
    argv = [sys.executable, "-m", "app.cli", "--server", "http://127.0.0.1:9"]  # nothing listens there
    term = Terminal(argv, env, cwd=str(ROOT), cols=100, rows=40)
    term.wait_for("Quit", 60, "the app's first frame")
    term.type(f"/attach {image}")
    term.press("enter")
    term.wait_for("Image #1 160x120", 30, "the chip")
    return term


async def test_without_true_colour_kitty_gets_half_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A picture's cells carry its id as their colour; where Textual rounds colours to 256 the id
    would be lost, and the picture is drawn with half-blocks instead."""
    monkeypatch.delenv("COLORTERM", raising=False)
    app, _ = make_app(tmp_path)
    app.graphics = "kitty"
    async with app.run_test() as pilot:
        await attach(app, pilot, quadrants(tmp_path / "quad.png"))
        (picture,) = app.query_one(AttachmentBar).query(Picture)
        assert app.console.color_system != "truecolor" and picture.drawn_with == "halfblocks"


def test_a_kitty_terminal_gets_the_picture_on_a_pty(tmp_path: Path) -> None:
    term = attach_on_a_pty(tmp_path, {"TERM": "xterm-kitty", "COLORTERM": "truecolor"})
    try:
        sent = re.search(rb"\x1b_Ga=T,U=1,f=100,t=d,q=2,i=(\d+),c=13,r=5,m=\d;", bytes(term.received))
        assert sent, "the PNG was sent to the terminal"
        colour = f"{int(sent.group(1)):06x}"
        cells = [
            c
            for row in term.screen.buffer.values()
            for c in row.values()
            if c.data[:1] == graphics.PLACEHOLDER
        ]
        assert len(cells) == 13 * 5 and {c.fg for c in cells} == {colour}
        assert sorted(graphics.placeholder_cells("".join(c.data for c in cells))) == [
            (row, col) for row in range(5) for col in range(13)
        ]
        term.press("ctrl+q")
        assert term.wait_exit(30) == 0
    finally:
        term.close()


def test_in_tmux_the_picture_is_half_blocks_and_no_graphics_are_sent(tmp_path: Path) -> None:
    term = attach_on_a_pty(
        tmp_path, {"TERM": "tmux-256color", "TMUX": "/tmp/tmux-0/x,1,0", "KITTY_WINDOW_ID": "1"}
    )
    try:
        term.pump(0.5)
        assert b"\x1b_G" not in term.received and graphics.PLACEHOLDER not in term.text()
        assert term.text().count("▀") >= 13 * 5
        term.press("ctrl+q")
        assert term.wait_exit(30) == 0
    finally:
        term.close()
