"""Keymap keys that Textual accepts and that never do what was asked (issue 64, item 25):
``quit = "full_stop"`` quit on typing "." and lost the draft (a character by its name types text
like the character); ``F12``, ``Ctrl+t`` never match (Textual compares keys as written, in lower
case); ``ctrl+m`` and ``ctrl+i`` reach the app as Enter and Tab; ``enter`` and ``tab`` are the
prompt's. Each is refused with the entry and the reason before the app starts."""

from __future__ import annotations

import pytest

from app.tui.keymap import check_keymap
from backend.config.settings import SettingsError


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"quit": "full_stop"}, "'full_stop' types text in the prompt"),
        ({"quit": "question_mark"}, "'question_mark' types text in the prompt"),
        ({"new_chat": "slash"}, "'slash' types text in the prompt"),
        ({"new_chat": "shift+exclamation_mark"}, "types text in the prompt"),
        ({"toggle_path": "F12"}, "'F12' never matches: Textual names keys in lower case ('f12')"),
        ({"toggle_path": "Ctrl+t"}, "lower case ('ctrl+t')"),
        ({"toggle_path": "ctrl+m"}, "'ctrl+m' reaches the app as enter"),
        ({"toggle_path": "ctrl+i"}, "'ctrl+i' reaches the app as tab"),
        ({"toggle_path": "f10,enter"}, "'enter' is the prompt's (sends the message)"),
        ({"toggle_path": "tab"}, "'tab' is the prompt's"),
    ],
)
def test_a_key_that_types_or_never_fires_is_refused(entry: dict[str, str], reason: str) -> None:
    with pytest.raises(SettingsError) as refused:
        check_keymap(entry)
    binding = next(iter(entry))
    assert f"[keymap] {binding} = {entry[binding]!r}: " in refused.value.problem
    assert reason in refused.value.problem
    assert "f6" in refused.value.fix


@pytest.mark.parametrize("key", ["f12", "ctrl+t", "ctrl+full_stop", "alt+question_mark", "f10,ctrl+t"])
def test_keys_that_fire_are_kept(key: str) -> None:
    check_keymap({"toggle_path": key})
