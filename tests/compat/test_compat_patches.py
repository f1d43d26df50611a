"""Issue 67 item 3: one table for the patches (``backend.compat.patches.PATCHES``) and one wrap
helper. Every declared target resolves in the installed vLLM, torch and transformers, so an upgrade
that renames or moves one fails here, not quietly at run time."""

from __future__ import annotations

import importlib
import logging
import re
import types
from pathlib import Path

import pytest

import backend.compat
from backend.compat import patches
from backend.compat.wrap import LOGGER, MissingTarget, wrap
from backend.config import switch_rules

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "backend" / "compat"
TARGETS = sorted({target for patch in patches.PATCHES for target in patch.targets})


def resolve(target: str) -> object:
    """``module:Attribute.path`` imported and looked up (``ImportError``/``AttributeError`` if gone)."""
    module_name, _, dotted = target.partition(":")
    found: object = importlib.import_module(module_name)
    for part in dotted.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize("target", TARGETS)
def test_every_declared_target_resolves_in_the_installed_versions(target: str) -> None:
    assert resolve(target) is not None or target.endswith(":enabled")


def test_a_target_that_is_gone_fails_the_resolution() -> None:
    with pytest.raises(AttributeError):
        resolve("vllm.v1.worker.gpu_worker:Worker.no_such_method_in_vllm")


def test_the_table_holds_every_hook_module_once_in_install_order(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = re.compile(r"^def install_import_hook\(", re.M)
    hook_modules = {path.stem for path in COMPAT.glob("*/*.py") if hook.search(path.read_text())}
    names = [patch.module for patch in patches.PATCHES]
    assert len(names) == len(set(names)) and {p.module for p in patches.HOOKS} == hook_modules
    assert all((COMPAT / p.concern / f"{p.module}.py").exists() for p in patches.PATCHES), "its concern's"
    installed: list[str] = []
    for patch in patches.HOOKS:
        module = importlib.import_module(f"backend.compat.{patch.concern}.{patch.module}")
        monkeypatch.setattr(module, "install_import_hook", lambda name=patch.module: installed.append(name))
    backend.compat.install_import_hooks()
    assert installed == [patch.module for patch in patches.HOOKS]
    linear = [installed.index(name) for name in ("embedding_pack", "cpu_linear", "row_exact_linear")]
    assert linear == sorted(linear), "row_exact_linear wraps (and checks) what the other two chose"


def test_each_patch_has_a_label_a_concern_and_a_declared_switch() -> None:
    for patch in patches.PATCHES:
        assert patch.label and patch.concern in ("dependencies", "linear", "speculation", "processes"), patch
        assert not patch.switch or patch.switch in switch_rules.SWITCH, patch
        assert all(":" in target for target in patch.targets), patch


def test_every_patch_is_in_the_patches_page() -> None:
    page = (ROOT / "docs" / "patches.md").read_text()
    for patch in patches.PATCHES:
        assert f"`{patch.module}`" in page, patch.module


class Owner:
    def method(self) -> str:
        return "original"


def _module(**attributes: object) -> types.ModuleType:
    module = types.ModuleType("fake_vllm_module")
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


def _shouting(original: object) -> object:
    def method(self: object) -> str:
        return original(self).upper()  # type: ignore[operator]

    return method


def test_wrap_replaces_once_keeps_the_original_and_marks() -> None:
    owner = type("Owner", (Owner,), {"method": Owner.method})
    module = _module(Owner=owner)
    assert wrap(module, {"Owner.method": _shouting}, mark="_done", label="test")
    assert not wrap(module, {"Owner.method": _shouting}, mark="_done", label="test")
    assert owner().method() == "ORIGINAL" and owner.method.__wrapped__ is Owner.method  # type: ignore[attr-defined]
    assert module._done is True


def test_wrap_on_class_marks_the_class_itself_not_its_subclasses() -> None:
    parent = type("Parent", (), {"method": Owner.method})
    child = type("Child", (parent,), {"method": Owner.method})
    assert wrap(_module(C=parent), {"C.method": _shouting}, mark="_m", label="t", on_class=True)
    assert wrap(_module(C=child), {"C.method": _shouting}, mark="_m", label="t", on_class=True)
    assert "_m" in vars(parent) and "_m" in vars(child)


def test_a_missing_target_is_logged_and_fails_unless_optional(caplog: pytest.LogCaptureFixture) -> None:
    module = _module(Owner=type("Owner", (), {}))
    needed = pytest.raises(MissingTarget, match=r"has no Owner\.method")
    with caplog.at_level(logging.WARNING, logger=LOGGER), needed:
        wrap(module, {"Owner.method": _shouting}, mark="_x", label="needed")
    assert "gemma-chat needed: not installed" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert not wrap(module, {"Gone.method": _shouting}, mark="_x", label="optional one", optional=True)
    assert "gemma-chat optional one: not installed: fake_vllm_module has no Gone.method" in caplog.text
    assert not hasattr(module, "_x")


def test_a_patch_is_installed_whole_or_not_at_all() -> None:
    owner = type("Owner", (), {"method": Owner.method})
    module = _module(Owner=owner)
    with pytest.raises(MissingTarget):
        wrap(module, {"Owner.method": _shouting, "Owner.other": _shouting}, mark="_y", label="pair")
    assert owner.method is Owner.method


def test_the_aot_cache_patch_says_when_torch_has_no_class(caplog: pytest.LogCaptureFixture) -> None:
    from backend.compat.dependencies import aot_cache_load

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        aot_cache_load.patch(_module())
    assert f"AOT cache load: not installed: fake_vllm_module has no {aot_cache_load.CLASS}" in caplog.text
