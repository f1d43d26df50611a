"""Compile a kernel's C source (alone, or with its PyTorch operator) into the cache directory, once
per source, flags, compiler and PyTorch version."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from backend.config import cache_json, locations

SOURCE_DIR = Path(__file__).parent
FLAGS = ("-O3", "-mavx2", "-mfma", "-shared", "-fPIC", "-pthread")


class KernelUnavailable(RuntimeError):
    """The kernel cannot be built or used here; the message says why."""


def compiler() -> str:
    found = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not found:
        raise KernelUnavailable("no C compiler (cc or gcc) on PATH")
    return found


def cxx_compiler() -> str:
    found = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not found:
        raise KernelUnavailable("no C++ compiler (c++ or g++) on PATH")
    return found


def _x86_64() -> None:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise KernelUnavailable(f"the kernel is written for x86-64, this is {platform.machine()}")


def _target(stem: str, key: bytes) -> Path:
    digest = hashlib.sha256(key).hexdigest()[:16]
    return locations.kernels_dir() / f"{stem}-{digest}.so"


def _elf_complete(path: Path) -> str:
    """ "" where ``path`` is a whole 64-bit ELF file (its section headers end within it); else why not."""
    try:
        with path.open("rb") as handle:
            header = handle.read(64)
            size = os.fstat(handle.fileno()).st_size
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    if len(header) < 64 or header[:5] != b"\x7fELF\x02":
        return "not a 64-bit ELF shared library"
    order: Literal["little", "big"] = "little" if header[5] == 1 else "big"
    section_headers = int.from_bytes(header[40:48], order)
    entry_size, count = int.from_bytes(header[58:60], order), int.from_bytes(header[60:62], order)
    if section_headers + entry_size * count > size:
        return f"truncated ({size:,} bytes, its headers end at {section_headers + entry_size * count:,})"
    return ""


def _usable(target: Path) -> bool:
    """Whether a kernel built earlier is there and whole; one that is not (a directory in its
    place, a truncated file) is set aside, named in the engine's start note, and built again."""
    if not os.path.lexists(target):
        return False
    if not target.is_file():
        cache_json.set_aside(target, "not a file where the compiled kernel belongs")
        return False
    problem = _elf_complete(target)
    if problem:
        cache_json.set_aside(target, f"the compiled kernel is {problem}")
        return False
    return True


def _make_folder(folder: Path) -> None:
    """The kernels' folder, where a file in its place is set aside first."""
    if os.path.lexists(folder) and not folder.is_dir():
        cache_json.set_aside(folder, "a file where the kernels' folder belongs")
    folder.mkdir(parents=True, exist_ok=True)


def _build(target: Path, commands: Callable[[Path], list[list[str]]]) -> Path:
    """Run ``commands(partial)`` (each must succeed), then move the result into place."""
    if _usable(target):
        return target
    _make_folder(target.parent)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        for command in commands(partial):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                source = next((Path(a).name for a in command if a.endswith((".c", ".cpp"))), command[0])
                raise KernelUnavailable(
                    f"{Path(command[0]).name} could not compile {source}: {done.stderr.strip()[-400:]}"
                )
        os.replace(partial, target)
    finally:
        for leftover in target.parent.glob(f"{partial.name}*"):
            leftover.unlink(missing_ok=True)
    return target


def compiled(name: str) -> Path:
    """Path of ``name``.c compiled as a shared library (built on first use, then reused)."""
    _x86_64()
    source = SOURCE_DIR / f"{name}.c"
    cc = compiler()
    target = _target(name, source.read_bytes() + " ".join((cc, *FLAGS)).encode())
    return _build(target, lambda out: [[cc, *FLAGS, "-o", str(out), str(source)]])


def compiled_operator(name: str, extra_flags: tuple[str, ...] = ()) -> Path:
    """``name``.c and ``name``_op.cpp, which registers it as a native PyTorch operator, as one
    shared library (built on first use against the installed PyTorch's headers, then reused);
    ``extra_flags`` go to the C compiler after the common ones (an instruction set)."""
    _x86_64()
    import torch
    from torch.utils import cpp_extension

    source, glue = SOURCE_DIR / f"{name}.c", SOURCE_DIR / f"{name}_op.cpp"
    cc, cxx = compiler(), cxx_compiler()
    includes = [f"-I{path}" for path in cpp_extension.include_paths()]
    library_dir = str(Path(torch.__file__).parent / "lib")
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    cxx_flags = ("-O2", "-std=c++17", "-shared", "-fPIC", "-pthread", abi)
    links = (f"-L{library_dir}", f"-Wl,-rpath,{library_dir}", "-ltorch_cpu", "-lc10")
    sources = source.read_bytes() + glue.read_bytes()
    tools = " ".join((cc, cxx, *FLAGS, *extra_flags, *cxx_flags, torch.__version__)).encode()
    target = _target(f"{name}_op", sources + tools)

    def commands(out: Path) -> list[list[str]]:
        kernel = out.with_name(f"{out.name}.o")
        c_flags = [flag for flag in FLAGS if flag != "-shared"] + list(extra_flags)
        return [
            [cc, *c_flags, "-c", "-o", str(kernel), str(source)],
            [cxx, *cxx_flags, *includes, "-o", str(out), str(glue), str(kernel), *links],
        ]

    return _build(target, commands)
