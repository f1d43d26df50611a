"""Hardening round 3 (issue 46, items 1 and 7): a model folder is input. A chat template that loops,
floods, raises, does not compile or is empty ends in a message naming the folder, within the render's
bound (item 1); a good template renders exactly as transformers renders it unbounded; an unusable
tokenizer, and with ``--server`` a ``--model`` that is no folder, are named (item 7)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from backend.engine.model.source import resolve
from backend.errors import NotACheckpoint
from backend.gemma4 import template_bounds
from backend.gemma4.messages import ChatMessage, PromptRenderer

LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
FLOODS = "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"
RECURSES = "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}"
RAISES = "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
BROKEN = "{% for message in messages %}{{ message['content'] }"
TOO_WIDE = "{% for i in range(100000000) %}x{% endfor %}"
"""Jinja's sandbox refuses the range itself (OverflowError): that was an internal error."""


def _folder(tmp_path: Path, template: str | None) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(resolve(None, demo=True).path, folder)
    if template is None:
        (folder / "chat_template.jinja").unlink()
    else:
        (folder / "chat_template.jinja").write_text(template)
    return folder


def _render(folder: Path) -> str:
    return PromptRenderer.for_model(str(folder)).render([ChatMessage("user", "Hello")]).text


@pytest.mark.parametrize(
    ("template", "said"),
    [
        (LOOPS, "ran for more than 5 s"),
        (FLOODS, "output passed 2,000,000 characters"),
        (RECURSES, "RecursionError"),
        (RAISES, "Conversation roles must alternate"),
        (BROKEN, "does not compile"),
        ("  \n", "is empty"),
        (TOO_WIDE, "failed while rendering: OverflowError: Range too big"),
        ("{{ messages + 1 }}", "failed while rendering: TypeError"),
    ],
    ids=["loops", "floods", "recurses", "raises", "broken", "empty", "too-wide", "type-error"],
)
def test_a_bad_template_is_a_message_naming_the_folder(tmp_path: Path, template: str, said: str) -> None:
    folder = _folder(tmp_path, template)
    renderer = PromptRenderer.for_model(str(folder))
    began = time.monotonic()
    with pytest.raises(template_bounds.TemplateFailed) as failed:
        renderer.render([ChatMessage("user", "Hello")])
    assert time.monotonic() - began < template_bounds.RENDER_SECONDS + 2
    assert str(folder) in str(failed.value) and said in str(failed.value)


def test_a_good_template_renders_as_transformers_does(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = resolve(None, demo=True).path
    messages = [{"role": "user", "content": "Hello"}]
    plain = AutoTokenizer.from_pretrained(str(folder)).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert _render(folder) == plain
    outside = PromptRenderer.for_model(str(folder)).tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert outside == plain, "outside a bounded render the template is transformers' own"


def test_a_folder_without_a_usable_tokenizer_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "{{ messages }}")
    (folder / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    with pytest.raises(NotACheckpoint) as failed:
        PromptRenderer.for_model(str(folder))
    assert str(folder) in str(failed.value) and "tokenizer" in str(failed.value)


@pytest.mark.parametrize("kind", ["file", "link-loop", "missing"])
def test_with_a_server_a_model_that_is_no_folder_is_named(tmp_path: Path, kind: str) -> None:
    """Hardening round 3: with --server, a --model that is a file, a link loop or missing was
    ignored, and the refusal said "Pass --model DIR" although one was passed."""
    from backend.config.settings import Settings
    from backend.engine.session.factory import remote_engine

    model = tmp_path / "model"
    if kind == "file":
        model.write_text("not a folder")
    elif kind == "link-loop":
        model.symlink_to(model)
    engine = remote_engine(Settings(model=str(model)), "http://127.0.0.1:9", "optimized")
    said = {"file": "is a file, not a folder", "link-loop": "is a broken link", "missing": "is no folder"}
    assert engine.tokenizer_dir is None and str(model) in engine.model_problem
    assert said[kind] in engine.model_problem
    assert remote_engine(Settings(), "http://127.0.0.1:9", "optimized").model_problem == ""


def test_ask_names_a_bad_template_before_any_engine_starts(tmp_path: Path) -> None:
    """The template is rendered before the engine starts: a broken one is refused in seconds
    (it took 88 s of engine start and first-start measuring, then an internal error)."""
    import subprocess
    import sys

    folder = _folder(tmp_path, TOO_WIDE)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "ask", "--model", str(folder), "hi"],
        capture_output=True,
        text=True,
        env={**os.environ, "GEMMA_CHAT_HOME": str(tmp_path / "home")},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"The chat template of {folder} failed while rendering" in done.stderr
    assert "measuring speculation" not in done.stderr, "no engine started"
    assert "Internal error" not in done.stderr and time.monotonic() - began < 60
