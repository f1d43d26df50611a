"""``gemma-chat ask`` and ``make-model`` as a user runs them, including the failures they must explain."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from backend.checkpoints import make_checkpoint
from backend.checkpoints.sizes import TINY


def _gemma_chat(
    *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    out, err = proc.communicate(timeout=timeout)
    assert not _leftovers(proc.pid), f"processes left behind: {_leftovers(proc.pid)}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _leftovers(group: int, grace_s: float = 15.0) -> list[psutil.Process]:
    """Live (non-zombie) processes of the command's process group, after a short grace period."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = [p for p in psutil.process_iter() if _alive_in_group(p, group)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def _alive_in_group(process: psutil.Process, group: int) -> bool:
    try:
        return os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE
    except (ProcessLookupError, psutil.Error):
        return False


def _assert_clear_failure(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def test_hub_model_without_network_or_local_copy(tmp_path: Path) -> None:
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = _gemma_chat("ask", "--model", "google/gemma-4-E2B-it", "Hi", env=offline)
    _assert_clear_failure(result, "google/gemma-4-E2B-it is not on this machine", "fix:", "--model", "--demo")


def test_paths_without_the_model_describes_it_from_its_shipped_config(tmp_path: Path) -> None:
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = _gemma_chat("paths", env=offline)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "google/gemma-4-E2B-it is not on this machine" in out and "hf download" in out
    for header in ("[baseline]", "[optimized] (default)", "[eager]"):
        assert header in out
    assert "max_model_len = 8192" in out or "max_model_len = 4096" in out or "max_model_len = 32768" in out
    measure = _gemma_chat("paths", "--measure", env=offline)
    _assert_clear_failure(measure, "--measure needs its weights")


def test_directory_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a model")
    result = _gemma_chat("ask", "--model", str(tmp_path), "Hi")
    _assert_clear_failure(result, "is not a model checkpoint: it has no config.json", "fix:")


def test_missing_attachment_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    result = _gemma_chat("ask", "--demo", "-a", str(tmp_path / "nope.png"), "Hi")
    _assert_clear_failure(result, "nope.png: no such file")


def test_make_model_writes_a_checkpoint(tmp_path: Path) -> None:
    result = _gemma_chat("make-model", str(tmp_path / "m"), "--size", "tiny", "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m" / "model" / "model.safetensors").is_file()
    assert (tmp_path / "m" / "drafter" / "model.safetensors").is_file()


def test_make_model_gives_the_drafter_centroids_or_says_why_not(tmp_path: Path) -> None:
    result = _gemma_chat("make-model", str(tmp_path / "m"), "--centroids", "64")
    assert result.returncode == 0, result.stderr
    assert "drafter with 64 centroids" in result.stdout
    drafter = json.loads((tmp_path / "m" / "drafter" / "config.json").read_text())
    assert drafter["use_ordered_embeddings"] is True and drafter["num_centroids"] == 64
    refused = _gemma_chat("make-model", str(tmp_path / "n"), "--centroids", "100")
    assert refused.returncode == 2 and "100 centroids do not divide a vocabulary of 512" in refused.stdout


@pytest.mark.engine
def test_kv_cache_too_small_for_the_context_window(tmp_path: Path) -> None:
    # A tiny model with a large KV footprint per token: 131072 tokens need more than 1 GiB.
    text = dataclasses.replace(
        TINY.text,
        num_attention_heads=8,
        num_key_value_heads=8,
        global_head_dim=512,
        max_position_embeddings=131072,
    )
    checkpoint = make_checkpoint(tmp_path / "wide-kv", dataclasses.replace(TINY, text=text), seed=0)
    result = _gemma_chat(
        "ask",
        "--model",
        str(checkpoint.model),
        "--path",
        "eager",
        "--kv-cache-gib",
        "1",
        "--max-model-len",
        "131072",
        "Hi",
    )
    _assert_clear_failure(result, "Not enough memory for the KV cache", "131072-token", "--max-model-len")


@pytest.mark.engine
def test_ask_demo_answers_code_inside_one_turn_with_figures() -> None:
    """The shipped demo model (trained on the standard library) writes a body for a signature."""
    result = _gemma_chat("ask", "--demo", "--path", "eager", "--max-tokens", "64", "def fibonacci(n):")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    figures, reply = lines[-1], "\n".join(lines[:-1])
    assert figures.startswith("── eager: TTFT ")
    for label in ("decode", "tok/s", "tokens"):
        assert label in figures
    prompt = re.search(r"\((\d+) prompt\)", figures)
    assert prompt and int(prompt.group(1)) < 40, "no tool declarations in the demo model's prompt"
    assert any(word in reply for word in ("return", "if ", " = ", "self")), reply
    assert "<|turn>" not in reply and "<turn|>" not in reply, "the reply stays inside one model turn"
    assert "Traceback" not in result.stderr


def test_paths_prints_every_path_with_reasons() -> None:
    result = _gemma_chat("paths", "--demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for header in ("[baseline]", "[optimized] (default)", "[eager]"):
        assert header in out
    optimized = out.split("[optimized]")[1].split("[eager]")[0]
    assert "'num_speculative_tokens': 4" in optimized, "the drafter is loaded, its drafts set at start"
    assert "[[1, 4, 0], [5, 65536, 0]]" in optimized, "no drafts until the start applies the choice"
    assert "speculation decided at this path's first start here" in optimized
    assert "GEMMA_CHAT_CPU_LINEAR" in optimized or "linear kernel not used" in optimized
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in optimized, "opt-in only: it breaks bfloat16 parity"
    assert "speculative_config" not in out.split("[baseline]")[1].split("[optimized]")[0]
    assert "max_model_len" in out and "context window" in out
    assert "cpu: " in out and "flags: " in out and "what the optimized path adds, per CPU class" in out
    table = out.split("per CPU class")[1].split("[baseline]")[0]
    assert table.count("AVX512-BF16 without AMX (") == 1 and table.count("AMX (e.g. Intel") == 1
    assert "* " in table
    forced = _gemma_chat("paths", "--demo", "--speculation", "mtp", "--draft-tokens", "3").stdout
    optimized = forced.split("[optimized]")[1].split("[eager]")[0]
    assert "MTP drafter" in optimized and "'num_speculative_tokens': 3" in optimized


@pytest.mark.engine
def test_ask_compare_prints_both_paths_speedup_and_verdict() -> None:
    result = _gemma_chat(
        "ask",
        "--demo",
        "--path",
        "compare",
        "--speculation",
        "mtp",
        "--dtype",
        "float32",
        "--max-tokens",
        "24",
        "Hello there",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("── baseline: TTFT ") for line in lines)
    assert any(line.startswith("── optimized: TTFT ") and "spec accepted" in line for line in lines)
    verdict = lines[-1]
    assert verdict.startswith("── compare: speed-up: decode ") and "end-to-end" in verdict
    assert "parity: identical (" in verdict, "float32 greedy tokens must match across paths"


def test_serve_prints_the_paths_own_vllm_serve_line() -> None:
    out = _gemma_chat("serve", "--demo", "--print", "--speculation", "mtp", "--port", "8123")
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "backend.compat.dependencies.vllm_cli serve " in line or " serve " in line
    assert "--speculative-config" in line and '"num_speculative_tokens":2' in line
    assert "--enable-per-request-metrics" in line and "--port 8123" in line and "--seed 0" in line
    assert "--per-request-spec-decode-metrics summary" in line and "--trust-request-chat-template" in line
    assert "--disable-log-stats" not in line, "false flags are left out"
    assert "VLLM_SERVER_DEV_MODE" not in line, "development endpoints only when asked"
    dev = _gemma_chat("serve", "--demo", "--print", "--dev-endpoints").stdout
    assert dev.startswith("VLLM_SERVER_DEV_MODE=1 ") or " VLLM_SERVER_DEV_MODE=1 " in dev
    multi = _gemma_chat(
        "serve",
        "--demo",
        "--print",
        "--path",
        "baseline",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "2",
        "--distributed-executor-backend",
        "ray",
    ).stdout
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2 --distributed-executor-backend ray" in multi
    assert "--speculative-config" not in multi and "GEMMA_CHAT_CPU_LINEAR" not in multi, "the baseline as is"
    refused = _gemma_chat("serve", "--demo", "--print", "--path", "compare")
    assert refused.returncode == 2 and "one path" in refused.stderr


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """Hardening round 4 (issue 55, item 11): ``paths --demo | head -1`` ended in an Internal
    error (BrokenPipeError, exit 1)."""
    import subprocess
    import sys

    env = {**os.environ, "GEMMA_CHAT_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "app.cli", "paths", "--demo"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as child:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline().startswith(b"model: demo")
        child.stdout.close()  # as `head -1` does
        errors = child.stderr.read().decode()
        assert child.wait(60) == 0, errors
    assert "Internal error" not in errors and "BrokenPipe" not in errors
