"""Gemma 4's audio tower on vLLM's CPU build.

The problem: vLLM replaces the audio tower's linear layers with its own CPU matrix
multiply, which needs a contiguous last dimension. The tower's light convolution block
(``Gemma4AudioLightConv1d``) transposes, convolves and transposes back, then hands that
non-contiguous tensor to ``Gemma4ClippableLinear``: the first audio request kills the
engine (``Expected a.stride(-1) == 1``, then ``EngineDeadError``).

The fix: ``Gemma4ClippableLinear.forward`` makes its input contiguous first. The values
are unchanged (a copy only where the layout needs one), on every platform.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from backend.compat.after_import import after_import
from backend.compat.wrap import wrap

MODULE = "transformers.models.gemma4.modeling_gemma4"
_PATCHED = "_gemma_chat_contiguous_input"


def _contiguous(original: Any) -> Any:
    def forward(self: Any, hidden_states: Any) -> Any:
        return original(self, hidden_states.contiguous())

    return forward


def patch(module: ModuleType) -> None:
    wrap(module, {"Gemma4ClippableLinear.forward": _contiguous}, mark=_PATCHED, label="audio", on_class=True)


def install_import_hook() -> None:
    after_import(MODULE, patch)
