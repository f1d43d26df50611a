"""Row-exact's verdict at a model's last start is kept per model and CPU, and described for
``gemma-chat paths`` with the layers the one-pass kernel could not prove named."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.compat.linear import row_exact_record


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path / "home"))


def test_a_kept_verdict_names_its_unproven_layers_for_this_model_and_cpu(tmp_path: Path) -> None:
    model = tmp_path / "model"
    verdict = {
        "variant": 79,
        "checked": 79,
        "kernel": True,
        "whole": 70,
        "rows_only": 6,
        "unproven": ["language_model.layers.0.self_attn.o_proj", "lm_head", "x"],
        "unproven_count": 5,
    }
    row_exact_record.keep(str(model), verdict, flags="avx2 avx512_bf16")
    assert row_exact_record.kept(str(model), flags="avx2") is None, "another CPU's verdict is not this one's"
    assert row_exact_record.kept(str(tmp_path / "other"), flags="avx2 avx512_bf16") is None
    found = row_exact_record.kept(str(model), flags="avx2 avx512_bf16")
    assert found is not None
    line = row_exact_record.describe(found)
    assert line.startswith("79 of 79 linear layers row-variant; one pass: 70 layers whole")
    assert "row by row (no proof): language_model.layers.0.self_attn.o_proj, lm_head, x and 2 more" in line
    proven = row_exact_record.describe({**verdict, "unproven": [], "unproven_count": 0})
    assert "none row by row" in proven


def test_a_damaged_record_reads_as_none_kept_and_is_written_anew(tmp_path: Path) -> None:
    path = row_exact_record.record_file()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert row_exact_record.kept(str(tmp_path), flags="f") is None
    row_exact_record.keep(str(tmp_path), {"variant": 0, "checked": 3}, flags="f")
    assert row_exact_record.kept(str(tmp_path), flags="f") == {
        "variant": 0,
        "checked": 3,
        "at": row_exact_record.kept(str(tmp_path), flags="f")["at"],  # type: ignore[index]
    }


def test_old_entries_go_beyond_the_most_kept(tmp_path: Path) -> None:
    for i in range(row_exact_record.MOST_ENTRIES + 3):
        row_exact_record.keep(str(tmp_path / f"m{i}"), {"checked": i}, flags="f")
    assert row_exact_record.kept(str(tmp_path / "m0"), flags="f") is None
    assert row_exact_record.kept(str(tmp_path / f"m{row_exact_record.MOST_ENTRIES + 2}"), flags="f")


def test_gemma_chat_paths_names_the_verdict_or_says_none_was_kept(tmp_path: Path) -> None:
    from app.commands.paths import _row_exact_verdict
    from backend.engine.model.source import ModelSource

    source = ModelSource(path=tmp_path / "m", drafter=None, name="m")
    assert _row_exact_verdict(source).startswith("not checked here yet")
    row_exact_record.keep(
        str(tmp_path / "m"), {"variant": 2, "checked": 2, "kernel": True, "unproven": ["o_proj"]}
    )
    assert "row by row (no proof): o_proj" in _row_exact_verdict(source)
