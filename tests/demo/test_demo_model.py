"""The trained demo model: corpus format, the training pipeline on a small slice, vLLM loading the result."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from backend.assets import ASSETS
from backend.checkpoints import GeneratedCheckpoint
from backend.demo.corpus import chat_turn, function_examples, python_files
from backend.demo.pipeline import DemoPlan, read_manifest, train_demo
from backend.demo.schedule import Budget
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource, calls_tools, demo_model
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.messages import ChatMessage, PromptRenderer

SOURCE = '''
import functools

def add(a, b):
    """Add two numbers.

    Returns their sum.
    """
    total = a + b
    return total

class Box:
    @functools.cache
    def size(self,
             unit="cm"):
        if unit:
            return 3
        return 0

    def one_liner(self): return 1

    def only_doc(self):
        """Nothing else."""
'''


def test_functions_split_into_signature_and_docstring_then_body() -> None:
    examples = list(function_examples(SOURCE))
    assert [prompt.splitlines()[0] for prompt, _ in examples] == ["def add(a, b):", "@functools.cache"]
    prompt, body = examples[0]
    assert prompt.endswith('Returns their sum.\n    """')
    assert body == "    total = a + b\n    return total\n"
    prompt, body = examples[1]
    assert prompt == '@functools.cache\ndef size(self,\n         unit="cm"):', "methods are dedented"
    assert body.startswith("    if unit:\n")
    assert list(function_examples("def broken(:\n")) == []


def test_training_text_is_what_the_chat_template_renders(tiny: GeneratedCheckpoint) -> None:
    renderer = PromptRenderer.for_model(str(tiny.model))
    prompt, body = next(function_examples(SOURCE))
    generation = renderer.render([ChatMessage("user", prompt)]).text
    whole = renderer.tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": body}], tokenize=False
    )
    head, tail = chat_turn(prompt, body)
    assert tail == f"{body}<turn|>\n"
    assert whole == f"{head}{body.strip()}<turn|>\n", "in history, Gemma 4's template trims a reply"
    assert head == generation, "the answer half starts exactly where the app's prompt ends"


def test_corpus_leaves_test_folders_out(tmp_path: Path) -> None:
    for name in ("json/decoder.py", "test/test_json.py", "idlelib/idle_test/x.py", "unittest/test/y.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    assert [p.relative_to(tmp_path).as_posix() for p in python_files(tmp_path)] == ["json/decoder.py"]


def test_learning_rate_warms_up_then_decays_to_its_floor() -> None:
    budget = Budget(seconds=100, lr=1e-3, warmup_steps=10)
    assert budget.lr_at(0, 0) == pytest.approx(1e-4)
    assert budget.lr_at(10, 0) == pytest.approx(1e-3)
    assert budget.lr_at(50, 50) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
    assert budget.lr_at(99, 200) == pytest.approx(1e-4)


def test_the_shipped_demo_model_is_the_trained_one() -> None:
    source = demo_model()
    assert source.path == ASSETS / "demo" / "model" and source.drafter == ASSETS / "demo" / "drafter"
    manifest = read_manifest(ASSETS / "demo")
    assert manifest["generator"] == "gemma-chat train-demo"
    assert manifest["command"].startswith("gemma-chat train-demo ")
    assert manifest["model"]["tokens_seen"] > 0 and manifest["drafter"]["steps"] > 0
    assert source.modalities() == {"text", "image", "video", "audio"}
    assert not calls_tools(None, demo=True), "trained without tool calls: prompts leave tools out"
    sizes = sum(f.stat().st_size for f in (ASSETS / "demo").rglob("*") if f.is_file())
    assert sizes < 60e6


@pytest.mark.engine
async def test_a_few_training_steps_make_a_checkpoint_vllm_drafts_with(
    tmp_path: Path, gemma_home: Path
) -> None:
    from tests.conftest import TEST_ENGINE

    plan = DemoPlan(
        out=tmp_path / "demo", minutes=30, drafter_minutes=30, seq_len=64, batch_size=2, limit_files=8
    )
    first = train_demo(_steps(plan, 2))
    assert first["model"]["steps"] == 2 and first["model"]["tokens_seen"] == 2 * 2 * 64
    resumed = train_demo(_steps(plan, 3))
    assert resumed["model"]["steps"] == 3, "the second run carries on from the saved state"
    assert resumed["drafter"]["steps"] == 3
    assert math.isfinite(resumed["model"]["held_out_loss_nats_per_token"])
    assert 0 <= resumed["drafter"]["held_out_top1_agreement"] <= 1
    assert json.loads((plan.out / "gemma-chat-checkpoint.json").read_text())["tool_calling"] is False

    source = ModelSource(path=plan.out / "model", drafter=plan.out / "drafter", name="slice")
    config = engine_config(EnginePath.optimized(), source, TEST_ENGINE)
    assert config.args["speculative_config"].value["model"] == str(plan.out / "drafter")
    engine = VllmEngine(source, config, log_path=gemma_home / "logs" / "demo-slice.log")
    await engine.start()
    try:
        prompt = PromptRenderer.for_model(str(source.path)).render([ChatMessage("user", "def add(a, b):")])
        request = EngineRequest(
            "slice", prompt.text, sampling=SamplingSettings(max_tokens=24, ignore_eos=True)
        )
        final = [event async for event in engine.stream(request)][-1]
    finally:
        await engine.shutdown()
    assert isinstance(final, Finished), final
    assert final.metrics.drafted_tokens and final.metrics.drafted_tokens > 0


def _steps(plan: DemoPlan, steps: int) -> DemoPlan:
    from dataclasses import replace

    return replace(plan, max_steps=steps)
