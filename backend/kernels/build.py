"""Compile a kernel's C source into the cache directory, once per source, flags and compiler."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

from backend import paths

SOURCE_DIR = Path(__file__).parent
FLAGS = ("-O3", "-mavx2", "-mfma", "-shared", "-fPIC", "-pthread")


class KernelUnavailable(RuntimeError):
    """The kernel cannot be built or used here; the message says why."""


def compiler() -> str:
    found = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not found:
        raise KernelUnavailable("no C compiler (cc or gcc) on PATH")
    return found


def compiled(name: str) -> Path:
    """Path of ``name``.c compiled as a shared library (built on first use, then reused)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise KernelUnavailable(f"the kernel is written for x86-64, this is {platform.machine()}")
    source = SOURCE_DIR / f"{name}.c"
    cc = compiler()
    digest = hashlib.sha256(source.read_bytes() + " ".join((cc, *FLAGS)).encode()).hexdigest()[:16]
    target = paths.cache_dir() / "kernels" / f"{name}-{digest}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    done = subprocess.run([cc, *FLAGS, "-o", str(partial), str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise KernelUnavailable(f"{cc} could not compile {source.name}: {done.stderr.strip()[-400:]}")
    os.replace(partial, target)
    return target
