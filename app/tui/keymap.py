"""The ``[keymap]`` settings checked before the chat app starts: Textual ignores an entry whose
binding id it does not know, and a key it cannot produce leaves the action unbound, both in
silence (``toggle_path = "f99"`` and F2 no longer switches the path). A mistake is refused like a
config typo — the entry, why, and the ids or keys that were probably meant — and the app does
not start with a keymap other than the one the user wrote. A key that types text (``q``,
``full_stop``) is refused for every binding (the prompt would lose it, or the binding never runs),
and so is a key Textual accepts but never delivers as written (``F12``, ``ctrl+m``, ``ctrl+i``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from backend.config.settings import SettingsError, config_file

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")


def bindings_by_class() -> list[dict[str, list[str]]]:
    """Each class's bindings (the app, its screens and widgets): id to its default keys."""
    from textual.dom import DOMNode

    import app.tui.app  # noqa: F401  (every screen and widget class is defined once it is imported)

    def subclasses(cls: type) -> Iterator[type]:
        subs: list[type] = cls.__subclasses__()
        for sub in subs:
            yield sub
            yield from subclasses(sub)

    found = []
    for cls in subclasses(DOMNode):
        ids = {
            binding.id: [k.strip().lower() for k in binding.key.split(",")]
            for binding in cls.__dict__.get("BINDINGS", [])
            if getattr(binding, "id", None)
        }
        if ids:
            found.append(ids)
    return found


def binding_ids(classes: list[dict[str, list[str]]] | None = None) -> set[str]:
    """Every binding id of the app, its screens and widgets (what ``[keymap]`` can rebind)."""
    return {name for ids in (bindings_by_class() if classes is None else classes) for name in ids}


PROMPT_KEYS = {
    "enter": "sends the message",
    "shift+enter": "inserts a newline",
    "ctrl+j": "inserts a newline",
    "tab": "completes a path and moves the focus",
}
"""Keys the prompt takes before any binding sees them."""


def types_text(key: str) -> bool:
    """Whether ``key`` types a character into the prompt (``q``, ``shift+e``, ``space``, and a
    character by its name: ``full_stop``, ``question_mark``, ``slash``)."""
    from textual.keys import REPLACED_KEYS, key_to_character

    *modifiers, base = key.strip().lower().split("+")
    if not all(m == "shift" for m in modifiers):
        return False
    if base == "space" or (len(base) == 1 and base.isprintable()):
        return True
    character = key_to_character(REPLACED_KEYS.get(base, base))
    return character is not None and len(character) == 1 and character.isprintable()


def never_fires(key: str) -> str | None:
    """Why a binding on ``key`` would be accepted by Textual and never run, or None: a name not as
    Textual spells it (``F12``: it compares keys as written), a key a terminal sends as another
    (``ctrl+m`` is Enter, ``ctrl+i`` is Tab), a key the prompt takes first."""
    from textual.keys import KEY_ALIASES

    written = key.strip()
    *modifiers, base = written.split("+")
    spelled = "+".join([*(m.lower() for m in modifiers), base.lower() if len(base) > 1 else base])
    if spelled != written:
        return f"{written!r} never matches: Textual names keys in lower case ({spelled!r})"
    same = {alias: key for key, aliases in KEY_ALIASES.items() for alias in aliases}
    if written in same:
        return f"{written!r} reaches the app as {same[written]} (a terminal sends the same byte for both)"
    if written in PROMPT_KEYS:
        return f"{written!r} is the prompt's ({PROMPT_KEYS[written]}): a binding there never runs"
    return None


def collision(
    keymap: dict[str, str], binding: str, key: str, classes: list[dict[str, list[str]]]
) -> str | None:
    """Another binding of the same screen or widget (``classes``: ``bindings_by_class()``) that
    ``key`` already presses (after ``keymap``)."""
    for ids in classes:
        if binding not in ids:
            continue
        for other, defaults in ids.items():
            keys = [k.strip().lower() for k in keymap[other].split(",")] if other in keymap else defaults
            if other != binding and key.strip().lower() in keys:
                return other
    return None


def key_names() -> set[str]:
    """Key names Textual can produce (``f2``, ``pageup``, ``space``, ``full_stop``…), without modifiers."""
    from textual.keys import KEY_NAME_REPLACEMENTS, KEY_TO_UNICODE_NAME, Keys

    names = {key.value.rsplit("+", 1)[-1] for key in Keys if not key.value.startswith("<")}
    return names | set(KEY_TO_UNICODE_NAME) | set(KEY_NAME_REPLACEMENTS.values())


def key_problem(key: str, known: set[str]) -> str | None:
    """Why ``key`` (``ctrl+shift+f2``) cannot be pressed, or None."""
    *modifiers, base = key.strip().lower().split("+")
    wrong = [m for m in modifiers if m not in MODIFIERS]
    if wrong:
        return f"{wrong[0]!r} is not a modifier ({', '.join(MODIFIERS)})"
    if len(base) == 1 and base.isprintable():
        return None
    if base in known:
        return None
    meant = difflib.get_close_matches(base, sorted(known), n=1)
    return f"{base!r} is not a key" + (f" (did you mean {meant[0]}?)" if meant else "")


def check_keymap(keymap: dict[str, str]) -> None:
    """``SettingsError`` for the first entry of ``keymap`` that would be ignored or unpressable."""
    if not keymap:
        return
    classes = bindings_by_class()
    ids, keys = binding_ids(classes), key_names()
    where = f"In {config_file()} (or GEMMA_CHAT_KEYMAP)"
    for binding, value in keymap.items():
        if binding not in ids:
            meant = difflib.get_close_matches(binding, sorted(ids), n=1)
            hint = f"Did you mean {meant[0]}? " if meant else ""
            raise SettingsError(
                f"{where}: [keymap] {binding} is not a binding id.",
                f"{hint}Binding ids (F1 lists them with their keys): {', '.join(sorted(ids))}.",
            )
        for key in value.split(",") if value.strip() else [""]:
            problem = key_problem(key, keys) if key.strip() else "no key given"
            problem = problem or never_fires(key)
            if not problem and types_text(key):
                problem = (
                    f"{key.strip()!r} types text in the prompt (a message would lose it): add a modifier"
                )
            taken = None if problem else collision(keymap, binding, key, classes)
            if taken:
                problem = f"{key.strip()!r} already presses {taken} (rebind that too, or choose another key)"
            if problem:
                raise SettingsError(
                    f"{where}: [keymap] {binding} = {value!r}: {problem}.",
                    'Write keys as Textual names them, e.g. "f6", "ctrl+t", "alt+p" (several: "f6,ctrl+t").',
                )
