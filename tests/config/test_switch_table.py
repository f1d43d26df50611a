"""Issue 67 item 3: one table for the ``GEMMA_CHAT_*`` switches (``switch_rules.SWITCHES``), checked
against the source (every name the code spells is declared, or is a setting) and against
docs/configuration.md (every switch documented under its kind, nothing documented that is not)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from backend.config import switch_rules
from backend.config.settings import ENV_PREFIX, Settings
from backend.config.settings_env import OTHER_VARIABLES, unknown_variables

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"GEMMA_CHAT_[A-Z0-9_]*[A-Z0-9]")
REFUSED_EXAMPLES = {"GEMMA_CHAT_TOOL__ENABLED", "GEMMA_CHAT_MAX_TOKEN"}
"""Names ``settings_env`` spells as examples of what it refuses."""
BOOTSTRAP = ROOT / "app" / "bootstrap.py"
INSTALLER = ROOT / "app" / "installer.py"
"""Standard library only, run before anything is installed: they read their own variables."""
DOCS = ROOT / "docs" / "configuration.md"


def _sources() -> list[Path]:
    return [path for folder in ("app", "backend") for path in sorted((ROOT / folder).rglob("*.py"))]


def _is_setting(name: str) -> bool:
    return not unknown_variables(Settings, ENV_PREFIX, {name: ""})


def test_every_name_the_code_spells_is_a_declared_switch_or_a_setting() -> None:
    undeclared = {
        f"{name} ({path.relative_to(ROOT)})"
        for path in _sources()
        for name in NAME.findall(path.read_text())
        if name not in switch_rules.SWITCH and name not in REFUSED_EXAMPLES and not _is_setting(name)
    }
    assert not undeclared, f"declare these in switch_rules.SWITCHES: {sorted(undeclared)}"


def test_a_name_that_is_neither_fails_the_check() -> None:
    """The check above can fail: a made-up switch is neither declared nor a setting."""
    assert "GEMMA_CHAT_NOT_A_SWITCH" not in switch_rules.SWITCH and not _is_setting("GEMMA_CHAT_NOT_A_SWITCH")
    assert _is_setting("GEMMA_CHAT_ENGINE__MAX_MODEL_LEN") and _is_setting("GEMMA_CHAT_API_KEY")


def test_only_the_table_declares_a_switch_name() -> None:
    """A ``X = "GEMMA_CHAT_..."`` constant anywhere else is a second declaration (bootstrap aside,
    which reads its variables by their names and may import nothing of the project)."""
    elsewhere = set()
    for path in _sources():
        if path in (BOOTSTRAP, INSTALLER, ROOT / "backend" / "config" / "switch_rules.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            constant = isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            value = node.value.value if constant else None  # type: ignore[attr-defined]
            if isinstance(value, str) and NAME.fullmatch(value):
                elsewhere.add(f"{value} ({path.relative_to(ROOT)})")
    assert not elsewhere


def test_bootstraps_variables_are_declared_as_set_up() -> None:
    read = set(NAME.findall(BOOTSTRAP.read_text() + INSTALLER.read_text()))
    assert read == {switch_rules.VENV, switch_rules.ENGINE_BUILD, switch_rules.INSTALLER}
    assert {switch_rules.SWITCH[name].kind for name in read} == {"set-up"}


def test_each_switch_is_declared_once_with_a_kind_a_default_and_a_meaning() -> None:
    names = [switch.name for switch in switch_rules.SWITCHES]
    assert len(names) == len(set(names)) and set(names) == OTHER_VARIABLES
    for switch in switch_rules.SWITCHES:
        assert switch.kind in switch_rules.KINDS and switch.default and switch.meaning, switch
    for name in switch_rules.FLAGS:
        assert switch_rules.SWITCH[name].default == "off"
    assert {"GEMMA_CHAT_LIVE_SPEC_METRICS", "GEMMA_CHAT_ROW_EXACT_ROWS"} <= set(names)


def test_the_table_reads_each_switch_by_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    for switch in switch_rules.SWITCHES:
        monkeypatch.delenv(switch.name, raising=False)
    monkeypatch.setenv(switch_rules.ROW_EXACT_ROWS, "4")
    monkeypatch.setenv(switch_rules.LIVE_SPEC_METRICS, "yes")
    monkeypatch.setenv(switch_rules.CPU_LINEAR, "/some/kernel.so")
    assert switch_rules.value(switch_rules.ROW_EXACT_ROWS) == 4
    assert switch_rules.value(switch_rules.LIVE_SPEC_METRICS) is True
    assert switch_rules.value(switch_rules.CPU_LINEAR) == "/some/kernel.so"
    assert switch_rules.value(switch_rules.NO_PREFILL_DRAFTS) is False
    parsed = {switch.name for switch in switch_rules.SWITCHES if switch.parsed}
    assert parsed == set(switch_rules.RULES)


def _documented_by_kind() -> dict[str, set[str]]:
    """The ``GEMMA_CHAT_*`` names in each ``### Kind`` section of the switches' section."""
    text = DOCS.read_text()
    section = text.split("## Environment variables beyond the settings", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    kind = ""
    for line in section.splitlines():
        if line.startswith("### "):
            kind = next((k for k in switch_rules.KINDS if line[4:].lower().startswith(k)), line)
        elif kind and line.startswith("| `"):
            found.setdefault(kind, set()).update(NAME.findall(line.split("|")[1]))
    return found


def test_every_switch_is_documented_under_its_kind_and_nothing_else_is() -> None:
    documented = _documented_by_kind()
    assert set(documented) == set(switch_rules.KINDS)
    for kind in switch_rules.KINDS:
        declared = {switch.name for switch in switch_rules.SWITCHES if switch.kind == kind}
        assert documented[kind] == declared, kind


def test_every_name_the_configuration_page_spells_exists() -> None:
    spelled = set(NAME.findall(DOCS.read_text()))
    assert {name for name in spelled if name not in switch_rules.SWITCH and not _is_setting(name)} == set()
