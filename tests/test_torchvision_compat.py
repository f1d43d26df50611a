"""The torchvision fix: transformers' Gemma 4 processor imports beside vLLM's CPU torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend import torchvision_compat


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_hook_is_installed_in_every_interpreter_of_the_environment() -> None:
    out = _run(
        "import sys; from backend.torchvision_compat import _BeforeTorchvision;"
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
    if _run("from backend.torchvision_compat import needs_schemas; assert needs_schemas()").returncode != 0:
        pytest.skip("this environment's torchvision loads on its own (CUDA torch or a +cpu torchvision)")
    out = _run(
        "import sys; from backend.torchvision_compat import _BeforeTorchvision;"
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _BeforeTorchvision)];"
        "import torchvision"
    )
    assert out.returncode != 0
    assert "torchvision::nms does not exist" in out.stderr


def test_define_schemas_runs_once() -> None:
    out = _run(
        "from backend import torchvision_compat as t; import torchvision;"
        "print(t.define_schemas(), t._library is not None or not t.needs_schemas())"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_schemas_match_torchvision_signatures() -> None:
    assert all("-> Tensor" in schema for schema in torchvision_compat.SCHEMAS)
    assert [s.split("(")[0] for s in torchvision_compat.SCHEMAS] == ["nms", "qnms"]
