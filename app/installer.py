"""The set-up's package installer: uv where it is there or installable, pip as the fallback.

Standard library only: this module runs before anything is installed.

* ``uv pip install`` downloads and installs in parallel. It is taken from ``PATH``, else installed
  with pip into a temporary folder (the ``uv`` wheel from the package index, a few seconds), and
  removed after the set-up. When uv cannot be had, or fails, pip installs instead, and one line says
  so. ``GEMMA_CHAT_INSTALLER=uv|pip`` forces one (a forced uv that fails stops the set-up).
* uv does not read pip's configuration: the local wheel folders pip's config names
  (``find-links``: where a machine may keep the ``+cpu`` torch build) are handed to uv.
* The CPU build's wheels come from one resolution: the CUDA-linked ``torchaudio`` and ``torchcodec``
  are excluded from it (uv's ``--excludes``), not installed and then removed.
* Both installers retry once with PyTorch's CPU wheel index for the CPU build, where torch's
  ``+cpu`` build is published (uv then ranks all indexes' versions together, as pip does); uv
  goes there at once where no local folder holds a ``+cpu`` torch wheel.
* Progress a person can read (``app.install_output``): uv's own progress bars on a terminal; off
  a terminal, and for pip, one line per large download and per phase; never the list of every
  package; the last lines of a failed install are shown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from app import install_output

INSTALLER_ENV = "GEMMA_CHAT_INSTALLER"
INSTALLERS = ("uv", "pip")
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Wheels that import against CUDA torch and break `import vllm` beside the CPU build.
CPU_BUILD_CONFLICTS = ("torchaudio", "torchcodec")
UV_INSTALL_TIMEOUT_S = 180

Say = Callable[[str], None]


class InstallFailed(Exception):
    """Every installer tried failed; the message says what was tried."""


def forced_installer() -> str | None:
    """``uv`` or ``pip`` when ``GEMMA_CHAT_INSTALLER`` forces one, None for the automatic choice."""
    forced = os.environ.get(INSTALLER_ENV, "").strip().lower()
    if not forced or forced == "auto":
        return None
    if forced not in INSTALLERS:
        raise SystemExit(f"{INSTALLER_ENV} must be one of auto, uv, pip (got {forced!r})")
    return forced


def run(command: Sequence[str], *, filtered: bool) -> tuple[int, list[str]]:
    """Run an installer; the seam the tests fake. Returns its exit status and its last lines.

    ``filtered``: its output is condensed to lines a person reads (pip; uv off a terminal);
    otherwise uv draws its progress bars on this terminal, without its list of every package."""
    if filtered:
        return install_output.run_condensed(command)
    return install_output.run_on_terminal(command), []


def pip_find_links(python: Path) -> list[str]:
    """The local wheel folders and pages pip's configuration names (``find-links``), in order."""
    try:
        out = subprocess.run(
            [str(python), "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if not key.endswith(".find-links"):
            continue
        for place in value.strip().strip("'\"").split():
            if place not in found:
                found.append(place)
    return found


def uv_supports(uv: Path, flag: str) -> bool:
    """True when this uv's ``pip install`` takes ``flag`` (an older uv on PATH may not)."""
    try:
        help_text = subprocess.run(
            [str(uv), "pip", "install", "--help"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in help_text


def find_uv(python: Path, into: Path) -> tuple[Path | None, str]:
    """uv from PATH, else installed with ``python``'s pip into ``into``; (None, why) when neither works."""
    on_path = shutil.which("uv")
    if on_path:
        return Path(on_path), ""
    command = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    try:
        code = subprocess.run(
            [*command, "--target", str(into), "uv"],
            capture_output=True,
            text=True,
            timeout=UV_INSTALL_TIMEOUT_S,
        ).returncode
    except (OSError, subprocess.SubprocessError):
        code = -1
    uv = into / "bin" / "uv"
    if code == 0 and uv.is_file():
        return uv, ""
    return None, f"uv is not on PATH and pip could not fetch it (exit {code})"


def compile_at_install() -> bool:
    """Compile every module to bytecode while installing: only where Python will not write it on
    first import (``PYTHONDONTWRITEBYTECODE``), else every start would read torch and vLLM from
    source. Elsewhere the set-up's own import check writes what a start needs, for less than
    compiling all of site-packages costs (both measured in the README's first-run figures)."""
    return bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))


def uv_command(
    uv: Path,
    python: Path,
    spec: str,
    *,
    find_links: Iterable[str],
    excludes: Path | None,
    extra_index: str | None = None,
) -> list[str]:
    command = [str(uv), "pip", "install", "--python", str(python), "-e", spec]
    if compile_at_install():
        command.append("--compile-bytecode")
    for place in find_links:
        command += ["--find-links", place]
    if excludes is not None:
        command += ["--excludes", str(excludes)]
    if extra_index:
        command += ["--extra-index-url", extra_index, "--index-strategy", "unsafe-best-match"]
    return command


def pip_command(python: Path, spec: str, *, extra_index: str | None = None) -> list[str]:
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    command += ["-e", spec]
    if not compile_at_install():
        command.append("--no-compile")
    if extra_index:
        command += ["--extra-index-url", extra_index]
    return command


def _attempts(build: str) -> list[str | None]:
    """The extra index of each try: none, then PyTorch's CPU index for the CPU build."""
    return [None, PYTORCH_CPU_INDEX] if build == "cpu" else [None]


def has_cpu_torch(find_links: Iterable[str]) -> bool:
    """True when one of these local folders holds a ``+cpu`` torch wheel."""
    for place in find_links:
        folder = Path(place.removeprefix("file://"))
        if folder.is_dir() and any(folder.glob("torch-*+cpu*.whl")):
            return True
    return False


def _uv_attempts(build: str, find_links: list[str]) -> list[str | None]:
    """As :func:`_attempts`, but uv reads no index from pip's config: without a local ``+cpu``
    torch wheel (a user's machine) the CPU build goes to PyTorch's index at once, rather than
    after a resolution that must fail (the package index has no ``+cpu`` builds)."""
    if build == "cpu" and not has_cpu_torch(find_links):
        return [PYTORCH_CPU_INDEX]
    return _attempts(build)


def _with_uv(uv: Path, python: Path, spec: str, build: str, work: Path, say: Say) -> str | None:
    """None when uv installed everything, else why it failed (its last line)."""
    excludes: Path | None = None
    if build == "cpu" and uv_supports(uv, "--excludes"):
        excludes = work / "excludes.txt"
        excludes.write_text("\n".join(CPU_BUILD_CONFLICTS) + "\n")
    links = pip_find_links(python)
    failure = "not run"
    for number, extra in enumerate(_uv_attempts(build, links)):
        if extra:
            again = "retrying with" if number else "adding"
            say(f"{again} PyTorch's CPU wheel index ({extra}) for torch's +cpu build")
        command = uv_command(uv, python, spec, find_links=links, excludes=excludes, extra_index=extra)
        code, tail = run(command, filtered=not sys.stderr.isatty())
        if code == 0:
            return None
        failure = f"uv failed (exit {code}: {tail[-1]})" if tail else f"uv failed (exit {code})"
    return failure


def _with_pip(python: Path, spec: str, build: str, say: Say) -> bool:
    for extra in _attempts(build):
        if extra:
            say(f"retrying with PyTorch's CPU wheel index ({extra}) for torch's +cpu build")
        code, tail = run(pip_command(python, spec, extra_index=extra), filtered=True)
        if code == 0:
            return True
        for line in tail[-12:]:
            print(f"  | {line}", file=sys.stderr, flush=True)
    return False


def install(python: Path, spec: str, build: str, say: Say) -> str:
    """Install ``spec`` (``ROOT[extras]``, editable) into ``python``'s environment.

    Returns the installer that did it (``uv`` or ``pip``); raises :class:`InstallFailed`."""
    forced = forced_installer()
    if forced != "pip":
        with tempfile.TemporaryDirectory(prefix="gemma-chat-uv-") as work:
            uv, failure = find_uv(python, Path(work) / "uv")
            if uv is not None:
                say(f"installing with uv ({uv})")
                failure = _with_uv(uv, python, spec, build, Path(work), say) or ""
                if not failure:
                    return "uv"
            if forced == "uv":
                raise InstallFailed(
                    f"{failure} ({INSTALLER_ENV}=uv). Unset {INSTALLER_ENV}, or set it to pip, "
                    "to install with pip."
                )
            say(f"{failure}: installing with pip instead")
    if _with_pip(python, spec, build, say):
        return "pip"
    raise InstallFailed(
        "pip could not install the packages above. The first run needs the package index "
        "(or a local mirror in pip's config); fix that and run again."
    )
