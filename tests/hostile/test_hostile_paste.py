"""A pasted ESC (issue 64, item 5): Textual's parser read an ``ESC`` inside a bracketed paste as a
key sequence, so what followed it was typed at once (the ``ESC`` as ``^``) ahead of the text
before it — ``^[31mred^[0m lastfirst`` was stored. The paste now arrives whole, in order, as text:
colour sequences dropped, other control characters visible."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual._xterm_parser import XTermParser

from app.tui.paste_input import PASTE_END, PASTE_START, PasteSafeParser, install, pasted_text
from app.tui.widgets.prompt_input import PromptInput
from tests.support.tui_pilot import make_app

TYPED = "first " + PASTE_START + "\x1b[31mred\x1b[0m last\x07" + PASTE_END + "!"


def _typed(parser: XTermParser, chunks: list[str]) -> str:
    """What the events of ``chunks`` would put in an input, in their order."""
    out = []
    for chunk in [*chunks, ""]:
        for event in parser.feed(chunk):
            if isinstance(event, events.Paste):
                out.append(event.text)
            elif isinstance(event, events.Key) and event.character:
                out.append(event.character)
    return "".join(out)


def test_stock_parser_reorders_a_pasted_escape() -> None:
    """The defect as Textual has it (so this file notices when Textual fixes it)."""
    assert _typed(XTermParser(), [TYPED]) != "first red last␇!"


@pytest.mark.parametrize("size", [2, 3, 5, 4096])
def test_a_paste_with_escapes_arrives_whole_and_in_order(size: int) -> None:
    chunks = [TYPED[i : i + size] for i in range(0, len(TYPED), size)]
    assert _typed(PasteSafeParser(), chunks) == "first red last␇!"


def test_keys_outside_a_paste_are_untouched() -> None:
    parser = PasteSafeParser()
    keys = [e.key for e in parser.feed("a\x1b[A\r") if isinstance(e, events.Key)]
    assert keys == ["a", "up", "enter"]


def test_an_unfinished_paste_goes_in_at_the_end_of_input() -> None:
    assert _typed(PasteSafeParser(), ["x" + PASTE_START + "\x1b[1mbold", "\x1b[20"]) == "xbold␛[20"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;title\x07text", "text"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("a\r\nb\rc", "a\nb\nc"),
        ("lone \x1b end", "lone ␛ end"),
        ("bell\x07 tab\t", "bell␇ tab\t"),
        ("plain [b]text[/b]", "plain [b]text[/b]"),
    ],
)
def test_pasted_text(raw: str, clean: str) -> None:
    assert pasted_text(raw) == clean


async def test_the_prompt_keeps_a_pasted_escape_in_order(tmp_path: Path) -> None:
    install()
    from textual.drivers import linux_driver

    assert linux_driver.XTermParser is PasteSafeParser
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"first ")
        app.post_message(events.Paste("\x1b[31mred\x1b[0m "))  # as the terminal's driver does
        await pilot.pause()
        await pilot.pause()
        await pilot.press(*"last")
        assert prompt.text == "first red last"


def test_a_start_marker_split_across_reads_still_opens_the_paste() -> None:
    chunks = ["first \x1b[", "2", "00~\x1b[1mx", "\x1b", "[201", "~!"]
    assert _typed(PasteSafeParser(), chunks) == "first x!"


def test_a_held_start_that_no_paste_follows_goes_on_as_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.tui.paste_input as paste_input

    parser = PasteSafeParser()
    assert list(parser.feed("\x1b[2")) == []  # may be a paste's start: held
    monkeypatch.setattr(paste_input, "HELD_S", -1.0)
    list(parser.tick())
    keys = [e.key for e in parser.feed("~") if isinstance(e, events.Key)]
    assert keys == ["insert"]
