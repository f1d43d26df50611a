"""The import-hook fixes: torchvision beside CPU torch, and the Gemma 4 audio tower on vLLM's CPU build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.compat.dependencies import torchvision_ops


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_hook_is_installed_in_every_interpreter_of_the_environment() -> None:
    out = _run(
        "import sys; from backend.compat.dependencies.torchvision_ops import _BeforeTorchvision;"
        "print(any(isinstance(f, _BeforeTorchvision) for f in sys.meta_path))"
    )
    assert out.stdout.strip() == "True", out.stderr


def test_gemma4_processor_imports_with_the_hook() -> None:
    out = _run(
        "import torchvision.transforms.v2.functional as F; from transformers import Gemma4Processor;"
        "import torch; print(F.resize(torch.zeros(3, 8, 8), [4, 4]).shape)"
    )
    assert out.returncode == 0, out.stderr
    assert "torch.Size([3, 4, 4])" in out.stdout


def test_without_the_hook_torchvision_fails_on_cpu_torch() -> None:
    """Proves the fix is needed here: remove the hook, and the import breaks as PLATFORM.md says."""
    if (
        _run(
            "from backend.compat.dependencies.torchvision_ops import needs_schemas; assert needs_schemas()"
        ).returncode
        != 0
    ):
        pytest.skip("this environment's torchvision loads on its own (CUDA torch or a +cpu torchvision)")
    out = _run(
        "import sys; from backend.compat.dependencies.torchvision_ops import _BeforeTorchvision;"
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _BeforeTorchvision)];"
        "import torchvision"
    )
    assert out.returncode != 0
    assert "torchvision::nms does not exist" in out.stderr


def test_define_schemas_runs_once() -> None:
    out = _run(
        "from backend.compat.dependencies import torchvision_ops as t; import torchvision;"
        "print(t.define_schemas(), t._library is not None or not t.needs_schemas())"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_schemas_match_torchvision_signatures() -> None:
    assert all("-> Tensor" in schema for schema in torchvision_ops.SCHEMAS)
    assert [s.split("(")[0] for s in torchvision_ops.SCHEMAS] == ["nms", "qnms"]


def test_audio_tower_linear_gets_a_contiguous_input() -> None:
    """vLLM's CPU linear requires stride(-1) == 1; the light-conv block hands it a transposed view."""
    out = _run(
        "import torch\n"
        "from transformers.models.gemma4 import modeling_gemma4 as m\n"
        "seen = []\n"
        "class Probe(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        seen.append(x.stride(-1)); return x\n"
        "cfg = m.Gemma4AudioConfig(hidden_size=8, use_clipped_linears=False)\n"
        "layer = m.Gemma4ClippableLinear(cfg, 8, 8); layer.linear = Probe()\n"
        "x = torch.randn(2, 8, 5).transpose(1, 2)\n"
        "assert x.stride(-1) != 1\n"
        "y = layer(x)\n"
        "print(seen, torch.equal(y, x))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[1]", "True"]


def test_several_patches_of_one_module_all_run_in_order(tmp_path: Path) -> None:
    """Two fixes may patch the same vLLM module: the second must not be dropped."""
    (tmp_path / "patched_here.py").write_text("seen = []\n")
    out = _run(
        f"import sys; sys.path.insert(0, {str(tmp_path)!r});"
        "from backend.compat.after_import import after_import;"
        "first = lambda m: m.seen.append('first'); second = lambda m: m.seen.append('second');"
        "after_import('patched_here', first); after_import('patched_here', second);"
        "after_import('patched_here', first);"
        "import patched_here; print(patched_here.seen);"
        "after_import('patched_here', lambda m: m.seen.append('late')); print(patched_here.seen)"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["['first', 'second']", "['first', 'second', 'late']"]
