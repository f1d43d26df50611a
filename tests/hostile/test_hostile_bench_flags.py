"""Hardening round 3 (issue 46, items 8, 12 and 13): ``bench``'s flags are checked before any engine
starts (item 8: a report path that could not be written ended the run in an internal error after all
of it; ``--requests -3`` ran); ``[engine] seed = -1`` is refused (item 12); the early-core variable
reads the usual words for off (item 13)."""

from __future__ import annotations

import pytest

from app.cli import build_parser
from app.commands.bench import run_bench_command


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--json", "/missing/dir/x.json"), "the folder /missing/dir does not exist"),
        (("--markdown", "/tmp"), "is a directory; name a file"),
    ],
    ids=["json-folder-missing", "markdown-directory"],
)
def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(
    args: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parsed = build_parser().parse_args(["bench", "--demo", *args])
    assert run_bench_command(parsed) == 2
    err = capsys.readouterr().err
    assert said in err and "starting the engine" not in err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--requests", "-3"), "'-3': use 1 or more"),
        (("--repetitions", "0"), "'0': use 1 or more"),
        (("--max-tokens", "many"), "'many' is not a whole number"),
    ],
    ids=["requests-negative", "repetitions-zero", "tokens-text"],
)
def test_a_count_below_one_is_refused_by_the_parser(
    args: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["bench", "--demo", *args])
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_a_negative_seed_is_refused_with_its_key() -> None:
    """Hardening round 3: ``[engine] seed = -1`` was accepted, then vLLM refused it after the start."""
    from pydantic import ValidationError

    from backend.config.settings import EngineSettings

    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        EngineSettings(seed=-1)
    assert EngineSettings(seed=7).seed == 7


@pytest.mark.parametrize(
    ("value", "off"), [("0", True), ("false", True), ("OFF", True), ("no", True), ("1", False)]
)
def test_the_early_core_variable_reads_the_usual_words_for_off(
    monkeypatch: pytest.MonkeyPatch, value: str, off: bool
) -> None:
    """Hardening round 3: ``GEMMA_CHAT_EARLY_CORE=false`` silently meant on."""
    from backend.compat.processes import early_core

    monkeypatch.setenv(early_core.VARIABLE, value)
    assert early_core.turned_off() is off
