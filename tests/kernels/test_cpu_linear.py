"""The optimized path's bfloat16 linear kernel: the same bits as PyTorch, in and out of vLLM."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from backend.compat.linear import cpu_linear
from backend.config.locations import KERNELS_ENV
from backend.config.settings import EngineSettings
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource
from backend.engine.paths.engine_args import Argument, EnginePath, engine_config
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.messages import ChatMessage, PromptRenderer
from backend.kernels import bf16_linear
from backend.kernels.env import KERNEL_ENV as CPU_LINEAR_ENV

WHY_NOT = bf16_linear.usable_here()
pytestmark = [
    pytest.mark.skipif(WHY_NOT is not None, reason=f"kernel not used on this CPU: {WHY_NOT}"),
    pytest.mark.second_lane,
]


@pytest.fixture(scope="module")
def kernel() -> bf16_linear.Linear:
    path, why = bf16_linear.for_engine()
    assert path is not None, why
    loaded = bf16_linear.load(path, threads=2)
    assert loaded is not None, "the kernel reproduces PyTorch's bfloat16 linear on this machine"
    return loaded


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8, 9, 31, 32, 33, 70])
def test_every_output_bit_matches_pytorch(kernel: bf16_linear.Linear, rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    for k, n in ((16, 5), (48, 17), (64, 64), (80, 33), (768, 130), (1040, 9)):
        scale = torch.logspace(-3, 3, k).to(torch.bfloat16)  # magnitudes that make rounding matter
        x = (torch.randn(rows, k, generator=generator) * scale).to(torch.bfloat16)
        w = torch.randn(n, k, generator=generator).to(torch.bfloat16)
        assert torch.equal(_bits(kernel(x, w)), _bits(torch.nn.functional.linear(x, w))), (rows, k, n)


def test_leading_dimensions_and_compiled_graphs(kernel: bf16_linear.Linear) -> None:
    x = torch.randn(2, 3, 256).to(torch.bfloat16)
    w = torch.randn(40, 256).to(torch.bfloat16)
    expected = torch.nn.functional.linear(x, w)
    assert torch.equal(_bits(kernel(x, w)), _bits(expected))
    with pytest.raises(RuntimeError, match="dtype"):
        kernel(torch.randn(2, 256), w)  # float32 input, bfloat16 weight: PyTorch's own error, not garbage
    compiled = torch.compile(lambda a, b: kernel(a, b) * 2, fullgraph=True, backend="eager")
    assert torch.equal(_bits(compiled(x, w)), _bits(expected * 2)), "an opaque operator to torch.compile"


def test_threads_share_products_and_a_busy_core_changes_no_bit(kernel: bf16_linear.Linear) -> None:
    """The helper thread claims column blocks; with another program spinning on its core it
    loses that core mid-block, and the products are still PyTorch's bits."""
    generator = torch.Generator().manual_seed(7)
    cases = [(rows, torch.randn(rows, 1024, generator=generator).to(torch.bfloat16)) for rows in (1, 6)]
    w = torch.randn(1536, 1024, generator=generator).to(torch.bfloat16)
    expected = [torch.nn.functional.linear(x, w) for _, x in cases]
    before = bf16_linear.stats()
    for _ in range(100):
        for (_, x), want in zip(cases, expected, strict=True):
            assert torch.equal(_bits(kernel(x, w)), _bits(want))
    idle = bf16_linear.stats()
    assert idle.shared + idle.alone >= before.shared + before.alone + 200
    assert idle.helper_blocks > before.helper_blocks, "the helper took part"
    helper_core = max(os.sched_getaffinity(0))
    busy = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{helper_core}}})\nwhile True: pass"]
    )
    try:
        for _ in range(300):
            for (_, x), want in zip(cases, expected, strict=True):
                assert torch.equal(_bits(kernel(x, w)), _bits(want))
    finally:
        busy.kill()
        busy.wait()
    loaded = bf16_linear.stats()
    assert loaded.shared + loaded.alone >= idle.shared + idle.alone + 600


def test_the_operator_is_native_where_a_cxx_compiler_builds_it(kernel: bf16_linear.Linear) -> None:
    path, why = bf16_linear.for_engine()
    assert path is not None and "native operator" in why and "not built" not in why, why
    assert bf16_linear.implementation() == "native"
    assert bf16_linear.handles(torch.empty(32, 256, dtype=torch.bfloat16), None), "8K weights pay natively"


_FALLBACK = """
import torch
from backend.kernels import bf16_linear
path, why = bf16_linear.for_engine()
assert path is not None and "not built" in why, why
assert bf16_linear.load(path) is not None
assert bf16_linear.implementation() == "python", bf16_linear.implementation()
assert not bf16_linear.handles(torch.empty(32, 256, dtype=torch.bfloat16), None), "too small for Python"
g = torch.Generator().manual_seed(3)
x = torch.randn(4, 512, generator=g).to(torch.bfloat16)
w = torch.randn(640, 512, generator=g).to(torch.bfloat16)
got, want = bf16_linear.bf16_linear(x, w), torch.nn.functional.linear(x, w)
assert torch.equal(got.view(torch.int16), want.view(torch.int16))
print("python fallback ok")
"""


def test_without_a_cxx_compiler_the_python_operator_gives_the_same_bits(tmp_path: Path) -> None:
    """No C++ compiler (or PyTorch headers): the C kernel alone, called through the Python operator."""
    env = {**os.environ, "CXX": "/bin/false", "GEMMA_CHAT_HOME": str(tmp_path)}
    env.pop(KERNELS_ENV, None)  # a cache of its own: nothing built before
    command = [sys.executable, "-c", _FALLBACK]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "python fallback ok" in done.stdout


def test_vllm_layers_on_the_pytorch_fallback_get_the_kernel(
    kernel: bf16_linear.Linear, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm.model_executor.layers import utils

    path, _ = bf16_linear.for_engine()
    monkeypatch.setenv(CPU_LINEAR_ENV, str(path))
    monkeypatch.setattr(utils, "dispatch_cpu_unquantized_gemm", utils.dispatch_cpu_unquantized_gemm)
    monkeypatch.delattr(utils, "_gemma_chat_cpu_linear", raising=False)
    cpu_linear.patch(utils)
    before = cpu_linear.layers_replaced()
    cases = ((torch.bfloat16, 512, True), (torch.float32, 512, False), (torch.bfloat16, 16, False))
    for dtype, width, replaced in cases:  # a 16 x 384 layer is too small to pay for the call
        layer = torch.nn.Linear(width, 384, bias=False).to(dtype)
        x = torch.randn(5, width).to(dtype)
        utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
        out = layer.cpu_linear(x, layer.weight, None)
        expected = torch.nn.functional.linear(x, layer.weight)
        assert torch.equal(out, expected) if replaced else torch.allclose(out, expected, atol=1e-4)
        assert ("kernel" in layer.cpu_linear.__code__.co_freevars) is replaced, (dtype, width)
    assert cpu_linear.layers_replaced() == before + 1, "large bfloat16 layers only"


def test_only_the_optimized_path_asks_for_it(tiny_source: ModelSource) -> None:
    settings = EngineSettings(dtype="bfloat16")
    optimized = engine_config(EnginePath.optimized(), tiny_source, settings)
    assert Path(optimized.env[CPU_LINEAR_ENV].value).is_file()
    assert "bit-identical" in optimized.env[CPU_LINEAR_ENV].reason
    for path in (EnginePath.baseline(), EnginePath.eager()):
        assert CPU_LINEAR_ENV not in engine_config(path, tiny_source, settings).env


@pytest.mark.engine
async def test_in_vllm_the_kernel_gives_the_baselines_tokens(
    tiny_source: ModelSource, gemma_home: Path
) -> None:
    """bfloat16 on random weights: logits so flat that one different bit would change a token."""
    settings = EngineSettings(dtype="bfloat16", max_model_len=2048, kv_cache_gib=1, speculation="none")
    eager = Argument(True, "tests: a quicker start; both engines alike")
    outputs: dict[str, list[list[int]]] = {}
    for path in (EnginePath.baseline(), EnginePath.optimized()):
        config = engine_config(path, tiny_source, settings)
        config = replace(config, args={**config.args, "enforce_eager": eager})
        if path.name == "optimized":  # the tiny checkpoint's layers are under the size threshold
            every = Argument(0, "tests: every bfloat16 layer through the kernel")
            config = replace(config, env={**config.env, bf16_linear.MIN_WEIGHTS_ENV: every})
        log = gemma_home / "logs" / f"kernel-{path.name}.log"
        engine = VllmEngine(tiny_source, config, log_path=log)
        with capture_stderr(log):  # the engine's processes log to the fd 2 they start with
            await engine.start()
        try:
            renderer = PromptRenderer.for_model(str(tiny_source.path))
            outputs[path.name] = []
            for i, text in enumerate(("Hello there", "Write a haiku about rivers.", "List three primes.")):
                prompt = renderer.render([ChatMessage("user", text)]).text
                sampling = SamplingSettings(max_tokens=24, ignore_eos=True)
                request = EngineRequest(f"k{i}", prompt, sampling=sampling)
                final = [event async for event in engine.stream(request)][-1]
                assert isinstance(final, Finished), final
                outputs[path.name].append(list(final.token_ids))
        finally:
            await engine.shutdown()
        used = "gemma-chat bf16 linear kernel: in use" in log.read_text()
        assert used is (path.name == "optimized"), path.name
    assert outputs["optimized"] == outputs["baseline"]
