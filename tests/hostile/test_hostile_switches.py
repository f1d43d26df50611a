"""Hardening round 5, items 23 and 24: every ``GEMMA_CHAT_*`` switch is parsed strictly by its rule
(``backend/config/switch_rules.py``), the variable named in the refusal, before an engine starts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from backend.config import switch_rules
from backend.config.settings_env import OTHER_VARIABLES
from backend.config.switches import SwitchError

ROOT = Path(__file__).resolve().parents[2]
HOST = switch_rules.HOST_MEMORY


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in [n for n in os.environ if n.startswith("GEMMA_CHAT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GEMMA_CHAT_HOME", str(tmp_path))


@pytest.mark.parametrize("value", ["inf", "1e400", "16GB", "abc", "0", "-1", "nan", "0.3", "-inf", "1e9"])
def test_a_forced_host_memory_outside_the_rule_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Round 5 item 23: inf and 1e400 raised OverflowError, 16GB/abc/0/-1/nan were ignored in
    silence, 0.3 made "This machine has 0.3 GiB"."""
    from backend.engine.cpu import host_plan

    monkeypatch.setenv(HOST, value)
    with pytest.raises(SwitchError) as refused:
        host_plan._forced()
    assert f"{HOST}={value!r}" in refused.value.problem and "GiB" in refused.value.problem
    assert "unset it" in refused.value.fix


@pytest.mark.parametrize(("value", "gib"), [("16", 16.0), (" 5.5 ", 5.5), ("1", 1.0), ("", None)])
def test_a_forced_host_memory_inside_the_rule_is_taken(
    monkeypatch: pytest.MonkeyPatch, value: str, gib: float | None
) -> None:
    monkeypatch.setenv(HOST, value)
    assert switch_rules.host_memory_gib() == gib


def test_load_settings_refuses_a_bad_switch_before_any_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.config.settings import load_settings

    monkeypatch.setenv(HOST, "inf")
    with pytest.raises(SwitchError, match=HOST):
        load_settings()
    monkeypatch.setenv(HOST, "16")
    assert load_settings() is not None


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "OFF", " No "])
def test_force_row_exact_takes_every_usual_word_for_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """Round 5 item 24: only ``off`` turned row-exact verification off; 0, false and no kept it on."""
    from backend.engine.cpu.env import row_exact_env

    assert row_exact_env(), "on by default"
    monkeypatch.setenv(switch_rules.FORCE_ROW_EXACT, value)
    assert row_exact_env() == {}
    monkeypatch.setenv(switch_rules.FORCE_ROW_EXACT, "yes")
    assert row_exact_env()


BOGUS = {
    **{name: "banana" for name in switch_rules.FLAGS},
    switch_rules.FORCE_ROW_EXACT: "maybe",
    switch_rules.EARLY_CORE: "later",
    switch_rules.GRAPHICS: "sixel",
    switch_rules.FORCE_LINEAR: "avx9",
    switch_rules.LINEAR_THREADS: "two",
    switch_rules.LINEAR_MIN_WEIGHTS: "-5",
    switch_rules.ROW_EXACT: "most",
    switch_rules.ROW_EXACT_ROWS: "1",
    switch_rules.SLOW_STEP_MS: "300ms",
    switch_rules.SPECULATION_DECISION: "coin",
    switch_rules.ENGINE_BUILD: "tpu",
    switch_rules.INSTALLER: "conda",
    HOST: "16GB",
}


@pytest.mark.parametrize(("name", "value"), sorted(BOGUS.items()))
def test_a_bogus_value_of_any_switch_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """Round 5 item 24: these were accepted in silence (a flag meant off, a bad mode or count the
    default)."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SwitchError) as refused:
        switch_rules.check_environment()
    assert f"{name}={value!r}" in refused.value.problem
    with pytest.raises(SwitchError):
        switch_rules.RULES[name]()


def test_every_switch_has_a_bogus_case_and_is_no_unknown_setting() -> None:
    assert set(BOGUS) == set(switch_rules.RULES)
    assert set(switch_rules.RULES) <= OTHER_VARIABLES


def test_valid_values_keep_their_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.compat.linear import row_exact_linear
    from backend.compat.processes import early_core, slow_steps
    from backend.kernels.env import forced

    for name in switch_rules.FLAGS:
        assert not switch_rules.on(name)
        monkeypatch.setenv(name, "1")
        assert switch_rules.on(name)
    monkeypatch.setenv(switch_rules.ROW_EXACT, "all")
    monkeypatch.setenv(switch_rules.ROW_EXACT_ROWS, "4")
    monkeypatch.setenv(switch_rules.SLOW_STEP_MS, "300")
    monkeypatch.setenv(switch_rules.FORCE_LINEAR, "Kernel")
    monkeypatch.setenv(switch_rules.SPECULATION_DECISION, "steps")
    monkeypatch.setenv(early_core.VARIABLE, "1")
    switch_rules.check_environment()
    assert switch_rules.row_exact_mode() == "all" and row_exact_linear.max_rows() == 4
    assert slow_steps.step_ms() == 300.0 and forced() == "kernel" and not early_core.turned_off()
    monkeypatch.setenv(switch_rules.ROW_EXACT, "0")
    assert switch_rules.row_exact_mode() == ""


@pytest.mark.parametrize(
    ("value", "on", "rows_only"),
    [("rows", True, True), ("ROWS", True, True), ("off", False, False), ("", True, False)],
)
def test_forced_row_exact_takes_rows_for_the_row_by_row_fallback(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool, rows_only: bool
) -> None:
    monkeypatch.setenv(switch_rules.FORCE_ROW_EXACT, value)
    switch_rules.check_environment()
    assert switch_rules.row_exact_forced_on() is on and switch_rules.row_exact_rows_only() is rows_only


SWITCH_CONSTANT_FILES = ("backend", "app")
NOT_PARSED = {switch.name for switch in switch_rules.SWITCHES if not switch.parsed}
"""Paths and ids (``switch_rules.text``): the kernels' paths the app sets in an engine's environment,
the speculation choices' file, the owner's process id, the home and environment folders."""


def test_every_switch_a_module_names_has_a_rule() -> None:
    """A new ``..._ENV = "GEMMA_CHAT_..."`` constant without a rule in switch_rules fails here."""
    named: set[str] = set()
    for folder in SWITCH_CONSTANT_FILES:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                    value = node.value.value
                    if isinstance(value, str) and value.startswith("GEMMA_CHAT_") and value.isupper():
                        named.add(value)
    assert named - NOT_PARSED - {"GEMMA_CHAT_"} <= set(switch_rules.RULES), named - set(switch_rules.RULES)
    assert "GEMMA_CHAT_FORCE_ROW_EXACT" in named and "GEMMA_CHAT_EARLY_CORE" in named
    assert {"GEMMA_CHAT_CPU_LINEAR", "GEMMA_CHAT_ROW_EXACT_KERNEL", "GEMMA_CHAT_OWNER"} <= NOT_PARSED
