"""Remote-server cases of the hostile corpus (issue 37, items 6-9): a scripted OpenAI-compatible
stand-in on 127.0.0.1 (``tests/support/remote_standin.py``) that stalls, streams forever, stops without
finishing, answers garbage or sends escape sequences."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.hostile.hostile_case import Case

TURN = "tests.hostile.hostile_remote:remote_turn"
SHORT = {"first_chunk_s": 2.0, "between_chunks_s": 2.0, "turn_s": 20.0}


def remote_cases(d: Path) -> Iterator[Case]:
    def turn(id: str, script: dict[str, Any], expect: str, *phrases: str, **more: Any) -> Case:
        args = [script, more.get("deadlines", SHORT), more.get("max_tokens", 16)]
        return Case(id, TURN, args, expect, phrases, {"timeout_s": 30})

    yield turn("a plain turn", {}, "ok", "3 tokens: 'Hello there.'")
    yield turn("headers then silence", {"completion": "silent"}, "refused", "sent nothing within 2 s")
    yield turn(
        "an endless stream",
        {"completion": "endless"},
        "refused",
        "kept sending past the reply budget (256 tokens)",
        max_tokens=256,
    )
    yield turn(
        "an endless stream without token ids",
        {"completion": "endless", "token_ids": False},
        "refused",
        "kept sending past the reply budget (64 tokens)",
        max_tokens=64,
    )
    yield turn(
        "an endless stream and a whole-turn limit",
        {"completion": "endless"},
        "refused",
        "whole turn's limit of 1 s",
        deadlines={**SHORT, "turn_s": 1.0},
        max_tokens=10**6,
    )
    yield turn(
        "a stream closed without [DONE] or a finish reason",
        {"completion": "no_finish"},
        "refused",
        "without finishing it",
        "the reply is incomplete",
    )
    server = "/v1/models"
    yield turn("/v1/models as HTML", {"models": "html"}, "refused", server, "not JSON", "text/html")
    yield turn("/v1/models as a JSON list", {"models": "list"}, "refused", server, "not a model list")
    yield turn("no max_model_len", {"models": "no_len"}, "refused", server, "max_model_len")
    yield turn("max_model_len 'lots'", {"models": "lots"}, "refused", server, "'lots'", "whole number")
    yield turn("/server_info as HTML", {"server_info": "html"}, "ok", "3 tokens")
    yield turn("/tokenize as HTML", {"tokenize": "html"}, "ok", "/tokenize", "was skipped")
    yield turn("no /tokenize", {"tokenize": "missing"}, "ok", "check that it serves this model", "skipped")
    yield Case(
        "escape sequences in a reply, through ask",
        "tests.hostile.hostile_remote:ask_remote",
        [{"completion": "escapes"}, str(d / "home")],
        "ok",
        ("Look:␛]52;c;", "␛]0;pwned␇", "␛[2J"),
        {"timeout_s": 60},
    )
