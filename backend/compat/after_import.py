"""Run a function right after a module is first imported (a post-import hook)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Patch = Callable[[ModuleType], None]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, patches: Sequence[Patch]) -> None:
        self._inner = inner
        self._patches = patches

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        for patch in self._patches:
            patch(module)


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders, then wraps its loader to run ``patches`` after it."""

    def __init__(self, name: str, patch: Patch) -> None:
        self.name = name
        self.patches: list[Patch] = [patch]

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, tuple(self.patches))
        return spec


def after_import(name: str, patch: Patch) -> None:
    """Call ``patch(module)`` once ``name`` is imported (at once if it already is).

    Several patches of one module run in the order they were registered; registering the same
    patch twice runs it once."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    for finder in sys.meta_path:
        if isinstance(finder, AfterImport) and finder.name == name:
            if patch not in finder.patches:
                finder.patches.append(patch)
            return
    sys.meta_path.insert(0, AfterImport(name, patch))


def wrap_own_methods(
    cls: type, names: Sequence[str], wrap: Callable[[str, Callable[..., object]], object]
) -> None:
    """Replace each method of ``names`` that ``cls`` defines itself (not one it inherits: the parent
    class is patched on its own) by ``wrap(name, method)``."""
    for name in names:
        if name in vars(cls):
            setattr(cls, name, wrap(name, vars(cls)[name]))
