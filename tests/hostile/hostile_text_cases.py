"""Tool-call texts, tool arguments, file names and config files for the hostile corpus."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.hostile_case import Case

CALL, END, Q = "<|tool_call>call:", "<tool_call|>", '<|"|>'
DEMO_MODEL = Path(__file__).resolve().parents[2] / "assets" / "demo" / "model"


def parser_cases() -> Iterator[Case]:
    def call(id: str, text: str, expect: str, *phrases: str) -> Case:
        return Case(id, "tests.hostile.hostile_cases:parse_call", [text], expect, phrases)

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


def calculator_cases() -> Iterator[Case]:
    def calc(id: str, expression: str, *phrases: str) -> Case:
        return Case(
            id,
            "tests.hostile.hostile_cases:calculate",
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


def file_cases(d: Path) -> Iterator[Case]:
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
            id, "tests.hostile.hostile_cases:read_file", [str(root), path], expect, phrases, {"timeout_s": 10}
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
        "tests.hostile.hostile_cases:list_and_render",
        [str(odd), str(DEMO_MODEL)],
        "ok",
        ("bad\\\\xffname.txt",),
        {"timeout_s": 60},
    )


def config_cases(d: Path) -> Iterator[Case]:
    def config(id: str, text: bytes, *phrases: str) -> Case:
        home = d / f"home-{len(list(d.glob('home-*')))}"
        (home / "config").mkdir(parents=True)
        (home / "config" / "config.toml").write_bytes(text)
        return Case(
            id, "tests.hostile.hostile_cases:load_config", [str(home)], "refused", ("config.toml", *phrases)
        )

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
