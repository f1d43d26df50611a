"""backend/ never loads a UI module; the command line loads no heavy module before it needs one."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import backend

UI_MODULES = ("textual", "rich", "app")
HEAVY_MODULES = ("torch", "vllm", "transformers", "textual")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_backend_imports_no_ui_module() -> None:
    names = [m.name for m in pkgutil.walk_packages(backend.__path__, "backend.")]
    assert "backend.vllm_engine" in names and "backend.checkpoints.writer" in names
    loaded = _loaded_after("\n".join(f"import {name}" for name in names))
    assert not loaded & set(UI_MODULES), f"backend imported {loaded & set(UI_MODULES)}"


def test_cli_imports_nothing_heavy_for_help() -> None:
    loaded = _loaded_after("import app.cli\napp.cli.build_parser().format_help()")
    assert not loaded & set(HEAVY_MODULES), f"gemma-chat --help would import {loaded & set(HEAVY_MODULES)}"


def test_help_runs_and_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("ask", "bench", "profiles", "make-model", "train-demo"):
        assert command in out.stdout
