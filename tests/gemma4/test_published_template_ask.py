"""``gemma-chat ask`` end to end with the published Gemma 4 template in a local model folder.

As a user's setup would be: a model folder whose ``chat_template.jinja`` is google/gemma-4-E2B-it's
current one, the app's own turn pipeline, and a server (a scripted OpenAI-compatible stand-in on
127.0.0.1) that answers with what the real model writes: calls with text before them, two calls
in one step, a call closed by the stop token, a thought, the bare ``thought`` label. The prompts the
stand-in received are what the published template rendered from the app's messages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backend.checkpoints import GeneratedCheckpoint
from tests.support.published_templates import CURRENT, published
from tests.support.remote_standin import Script, Standin

ROOT = Path(__file__).resolve().parents[2]
Q = '<|"|>'
CALC = f"<|tool_call>call:calculator{{expression:{Q}6*7{Q}}}<tool_call|>"
TIME = f"<|tool_call>call:current_time{{timezone:{Q}UTC{Q}}}<tool_call|>"


@pytest.fixture(scope="module")
def model_folder(tiny: GeneratedCheckpoint, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("published") / "gemma-4-local"
    shutil.copytree(tiny.model, folder)
    (folder / "chat_template.jinja").write_text(published(CURRENT))
    return folder


@pytest.fixture
def serve(model_folder: Path) -> Iterator[Callable[[list[str]], Standin]]:
    """Stand-ins that answer with scripted replies, tokenizing with the model folder's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    running: list[Standin] = []

    def start(replies: list[str]) -> Standin:
        script = Script(
            replies=replies,
            tokenizer=lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]),
        )
        running.append(Standin(script).__enter__())
        return running[-1]

    yield start
    for standin in running:
        standin.__exit__()


def _ask(folder: Path, server: Standin, home: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "app.cli", "ask", "--model", str(folder), "--server", server.url, *flags]
    env = {**os.environ, "GEMMA_CHAT_HOME": str(home)}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_tool_turn_with_text_before_two_calls_and_a_stop_closed_call(
    model_folder: Path, serve: Callable[[list[str]], Standin], tmp_path: Path
) -> None:
    server = serve(["Let me compute that." + CALC + TIME, CALC.removesuffix("<tool_call|>"), "It is 42."])
    done = _ask(model_folder, server, tmp_path, "What is 6*7, and the time?", "--yes")
    assert done.returncode == 0, done.stderr
    first, second, third = server.prompts
    assert "<|tool>declaration:calculator{" in first and first.endswith("<|turn>model\n")
    # the results, each under its own call's name, and the model's turn left open for it
    assert second.startswith(first)
    assert "<|tool_response>response:calculator{result:42}<tool_response|>" in second
    assert "<|tool_response>response:current_time{" in second
    assert second.index("response:calculator") < second.index("response:current_time")
    assert second.endswith("<tool_response|>"), "the step after a tool continues the model's turn"
    assert "Let me compute that." not in second[len(first) :], "text before a call must not close the turn"
    # the call closed by the stop token ran
    assert third.endswith("<tool_response|>") and third.count("response:calculator") == 2
    out = done.stdout
    assert "Let me compute that." in out and "It is 42." in out
    assert out.count("✓ calculator") == 2 and "✓ current_time" in out
    assert "<|" not in out and "|>" not in out


def test_thinking_mode_shows_the_thought_apart_and_json_keeps_it(
    model_folder: Path, serve: Callable[[list[str]], Standin], tmp_path: Path
) -> None:
    server = serve(
        [
            "<|channel>thought\nThe user wants a product.<channel|>" + CALC,
            "It came back as 42.<channel|>The product is 42.",
        ]
    )
    done = _ask(model_folder, server, tmp_path, "6*7?", "--think", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    first, second = server.prompts
    assert first.startswith("<bos><|turn>system\n<|think|>\n")
    # 07-09 reopens the thought channel after results; the reply starts inside it
    assert second.endswith("<tool_response|><|channel>thought\n")
    assert "<|channel>thought\nThe user wants a product.\n<channel|><|tool_call>" in second
    path = json.loads(done.stdout)["paths"]["optimized"]
    assert path["reply"] == "The product is 42."
    assert path["thought"] == "The user wants a product.\n\nIt came back as 42."
    assert path["figures"]["thought_tokens"] > 0


def test_a_bare_thought_label_and_the_text_output_of_a_thought(
    model_folder: Path, serve: Callable[[list[str]], Standin], tmp_path: Path
) -> None:
    server = serve(["thought\nParis is the capital of France."])
    done = _ask(model_folder, server, tmp_path, "Capital of France?", "--no-tools")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Paris is the capital of France.")
    assert "thought" not in done.stdout.split("──")[0]
    server = serve(["<|channel>thought\nRecall the capital.<channel|>Paris."])
    done = _ask(model_folder, server, tmp_path, "Capital of France?", "--no-tools", "--think")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("thought: Recall the capital.\n\nParis.")
