"""The host-memory plan on the CPU build (``host_plan``): E2B's two engines on 16, 32 and 64 GiB of
RAM, a measured footprint preferred to the estimate, and what the app and ``ask`` do with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config.settings import EngineSettings, Settings
from backend.engine.cpu import footprints, processes
from backend.engine.cpu.host_plan import FORCE_ENV, HostRefused
from backend.engine.cpu.kv_size import cpu_kv_cache
from backend.engine.model.footprint import GIB
from backend.engine.model.source import resolve
from backend.engine.paths.placement import host_plan_for
from backend.engine.session.factory import EngineSetup
from tests.support.e2b_folder import make_e2b_folder


@pytest.fixture(scope="module")
def e2b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_e2b_folder(tmp_path_factory.mktemp("host-plan"))


def _plan(e2b: Path, ram_gib: float, monkeypatch: pytest.MonkeyPatch, **settings: object):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(FORCE_ENV, str(ram_gib))
    return host_plan_for(resolve(str(e2b)), EngineSettings(**settings))  # type: ignore[arg-type]


def test_e2b_on_16_gib_plans_one_engine_at_a_time_and_says_so(
    e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(e2b, 16, monkeypatch)
    assert plan.mode == "swap" and plan.swaps
    text = "\n".join(plan.lines())
    assert "one engine fits in RAM, two do not" in text and "the swap is never timed" in text
    assert f"forced by {FORCE_ENV}" in text
    optimized = plan.footprints["optimized"]
    assert not optimized.measured and "weights 9.69 + KV cache 1.25 + runtime 1.75 GiB" in optimized.how


def test_e2b_on_64_gib_keeps_both_engines_up(
    e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _plan(e2b, 64, monkeypatch).mode == "side-by-side"


def test_e2b_on_8_gib_is_refused_before_any_engine_starts_with_both_numbers(
    e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(HostRefused) as refused:
        _plan(e2b, 8, monkeypatch)
    message = str(refused.value)
    assert "This machine has 8.0 GiB of RAM available" in message
    assert "needs 12.9 GiB while it starts" in message and "9.9 GiB at the very least" in message, message


def test_an_estimate_does_not_refuse_a_small_model_on_a_small_machine(
    gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's estimate (runtime 1.75 GiB, measured at E2B's size) is far above what it holds
    (0.8 GiB measured): 3 GiB of RAM runs it, one engine at a time."""
    from backend.engine.model.source import demo_model

    monkeypatch.setenv(FORCE_ENV, "3")
    assert host_plan_for(demo_model(), EngineSettings()).mode == "swap"


def test_settings_force_a_mode(e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _plan(e2b, 64, monkeypatch, both_paths="swap").mode == "swap"
    assert _plan(e2b, 16, monkeypatch, both_paths="side-by-side").mode == "side-by-side"


def test_a_measured_footprint_replaces_the_estimate(
    tmp_path: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORCE_ENV, "16")
    source = resolve(str(make_e2b_folder(tmp_path)))
    kv = int(cpu_kv_cache(None, source.path, 8192, "auto", source.drafter).value)
    for path, drafter in (("baseline", None), ("optimized", source.drafter)):
        footprints.record(footprints.key(source.path, drafter, path, kv), int(6 * GIB))
    plan = host_plan_for(source, EngineSettings(max_model_len=8192))
    assert plan.footprints["optimized"].measured and plan.mode == "side-by-side", plan.lines()
    assert "6.00 GiB resident when its last start here was ready" in "\n".join(plan.lines())


def test_the_app_swaps_where_the_host_holds_one_engine(
    e2b: Path, gemma_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORCE_ENV, "16")
    setup = EngineSetup(Settings(model=str(e2b)))
    assert setup.swaps() and setup.host is not None and setup.host.mode == "swap"


def test_an_engine_ended_by_the_oom_killer_is_said_to_have_run_out_of_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kills = iter([7, 8])
    monkeypatch.setattr(processes, "oom_kills", lambda: next(kills))
    before = processes.oom_kills()
    assert processes.dead_message(before).startswith("The engine ran out of memory: the system's OOM killer")
    monkeypatch.setattr(processes, "oom_kills", lambda: 7)
    assert processes.dead_message(7) == processes.DEAD
