"""Hardening round 5, item 22: a recorded footprint in engine-footprints.json that refuses the demo
for good. A record no start here could have made (more than the machine's RAM and swap) is
discarded; a refusal that rests on a measured footprint names the file and how to forget it, and
never suggests --demo to a run of the demo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.config.settings import EngineSettings
from backend.engine.cpu import footprints
from backend.engine.cpu.host_plan import FORCE_ENV, HostRefused
from backend.engine.cpu.kv_size import cpu_kv_cache, cpu_window
from backend.engine.model.footprint import GIB
from backend.engine.model.source import demo_model
from backend.engine.paths.placement import host_plan_for


def _record_for_the_demo(size: int) -> None:
    settings = EngineSettings()
    source = demo_model()
    window = cpu_window(source.path, settings.max_model_len)
    kv = int(cpu_kv_cache(settings.kv_cache_gib, source.path, window, settings.dtype, source.drafter).value)
    path = footprints.records_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [
        footprints.key(source.path, d, p, kv) for p, d in (("baseline", None), ("optimized", source.drafter))
    ]
    path.write_text(json.dumps(dict.fromkeys(entries, size)))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))
    monkeypatch.setenv(FORCE_ENV, "16")
    return tmp_path


def test_an_absurd_recorded_footprint_is_discarded(home: Path) -> None:
    """2 TiB recorded for the demo refused every demo start; no start here could have measured it."""
    _record_for_the_demo(2 << 40)
    plan = host_plan_for(demo_model(), EngineSettings())
    assert not plan.footprints["optimized"].measured and not plan.footprints["baseline"].measured
    footprints.record("any", 2 << 40)
    assert "any" not in footprints.records_file().read_text(), "never recorded either"


def test_a_refusal_from_a_measured_footprint_names_the_file_and_not_the_demo(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(footprints, "machine_bytes", lambda: 64 * GIB)
    _record_for_the_demo(40 * GIB)  # possible on this "machine", more than the 16 GiB forced
    with pytest.raises(HostRefused) as refused:
        host_plan_for(demo_model(), EngineSettings())
    fix = refused.value.fix
    assert "engine-footprints.json" in fix and str(footprints.records_file()) in fix and "delete" in fix
    assert "--demo" not in str(refused.value)


def test_a_refusal_for_another_model_still_suggests_the_demo(home: Path) -> None:
    from backend.engine.cpu.host_plan import plan_host
    from backend.engine.model.footprint import Size

    sizes = {"baseline": Size(40 * GIB, False, "estimate"), "optimized": Size(40 * GIB, False, "estimate")}
    with pytest.raises(HostRefused) as refused:
        plan_host(sizes)
    assert "--demo" in refused.value.fix and "engine-footprints.json" not in refused.value.fix
