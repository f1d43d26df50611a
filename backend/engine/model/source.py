"""Turn ``--model`` / ``--demo`` into a local checkpoint directory (and its drafter), or a clear error.

* A local directory must hold ``config.json`` and weights (``*.safetensors`` or ``*.bin``).
* A hub id (``google/gemma-4-E2B-it``) is looked up in the local Hugging Face cache first,
  then downloaded; without network and without a local copy the error says how to get one.
* ``--demo`` uses a generated checkpoint kept in the cache directory (made on first use).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from backend.assets import ASSETS, asset
from backend.config import locations
from backend.errors import ModelNotFound, NotACheckpoint

DEFAULT_MODEL = "google/gemma-4-E2B-it"
DEFAULT_DRAFTER = "google/gemma-4-E2B-it-assistant"
GENERATED_MANIFEST = "gemma-chat-checkpoint.json"
DEMO_SIZE, DEMO_SEED = "tiny", 0
DEMO_NAME = "demo (10M-parameter Gemma 4 trained on Python's standard library)"
DEMO_SHORT_NAME = "demo (10M Gemma 4)"
"""The demo model's name where space is short (the chat app's status bar)."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: its directory, its MTP drafter directory if known, and a display name."""

    path: Path
    drafter: Path | None
    name: str
    drafter_note: str = ""
    """Where the drafter was found, or where it was looked for when it was not."""

    def modalities(self) -> frozenset[str]:
        """What the checkpoint takes: text, plus image/video with a vision tower, audio with an audio one."""
        config = json.loads((self.path / "config.json").read_text())
        kinds = {"text"}
        if config.get("vision_config"):
            kinds |= {"image", "video"}
        if config.get("audio_config"):
            kinds.add("audio")
        return frozenset(kinds)


def generated_manifest(model: str | None, demo: bool) -> dict[str, object]:
    """The manifest of a checkpoint gemma-chat made (``{}`` for any other model), without downloading."""
    if demo:
        candidates = [ASSETS / "demo"]
    elif model:
        local = Path(model).expanduser()
        candidates = [local, local.parent]
    else:
        return {}
    for root in candidates:
        try:
            return dict(json.loads((root / GENERATED_MANIFEST).read_text()))
        except (OSError, ValueError):
            continue
    return {}


def calls_tools(model: str | None, demo: bool) -> bool:
    """False for a checkpoint trained without tool calls (the demo model): its prompts leave tools out."""
    return generated_manifest(model, demo).get("tool_calling", True) is not False


def _looks_like_hub_id(model: str) -> bool:
    return model.count("/") == 1 and not model.startswith((".", "/", "~"))


def check_checkpoint_dir(path: Path) -> None:
    if not path.is_dir():
        raise NotACheckpoint(f"{path} is not a directory.", "Point --model at a checkpoint folder.")
    if not (path / "config.json").is_file():
        raise NotACheckpoint(
            f"{path} is not a model checkpoint: it has no config.json.",
            "Point --model at a folder with config.json and *.safetensors "
            "(for example a downloaded google/gemma-4-E2B-it), or try --demo.",
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise NotACheckpoint(
            f"{path} has a config.json but no weights (*.safetensors).",
            "Finish the download or copy the weight files into it.",
        )
    try:
        json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise NotACheckpoint(f"{path}/config.json cannot be read: {error}.", "Re-download it.") from None


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached (or partially): try the network next
        pass
    try:
        return Path(snapshot_download(repo_id))
    except Exception as error:
        raise ModelNotFound(
            f"{repo_id} is not on this machine and could not be downloaded ({type(error).__name__}).",
            f"On a machine with network run `hf download {repo_id}` (or copy the folder here) and "
            "pass --model /path/to/it; or try the app offline with --demo.",
        ) from None


def _generated_drafter(path: Path) -> Path | None:
    """A generated checkpoint's drafter lives beside it (``make-model`` writes both)."""
    for root in (path.parent, path):
        if (root / GENERATED_MANIFEST).is_file() and (root / "drafter").is_dir():
            return root / "drafter"
    return None


def resolve(model: str | None, demo: bool = False, drafter: str | None = None) -> ModelSource:
    """The checkpoint for ``--model`` (default Gemma 4 E2B) or ``--demo``, with its drafter
    (``drafter``: a folder given in settings, else found by ``drafters.find_drafter``)."""
    from backend.engine.model.drafters import explicit_drafter, find_drafter

    if demo:
        return demo_model()
    model = model or DEFAULT_MODEL
    local = Path(model).expanduser()
    if local.exists() or not _looks_like_hub_id(model):
        if (local / GENERATED_MANIFEST).is_file():
            local = local / "model"
        check_checkpoint_dir(local)
        path, name, hub_id = local.resolve(), local.name, None
    else:
        path, name, hub_id = _download(model), model, model
        check_checkpoint_dir(path)
    found: Path | None
    if drafter:
        found, note = explicit_drafter(Path(drafter).expanduser()), f"from settings: {drafter}"
    elif (found := _generated_drafter(path)) is not None:
        note = "the generated checkpoint's drafter"
    else:
        found, note = find_drafter(path, hub_id, _download)
    return ModelSource(path=path, drafter=found, name=name, drafter_note=note)


DESCRIBED_CONFIGS = {"model": "gemma4_e2b_config.json", "drafter": "gemma4_e2b_assistant_config.json"}


def described_default_model() -> ModelSource:
    """Gemma 4 E2B and its drafter as the configs shipped in ``assets/`` describe them — no weights.

    For showing what each engine path would run before the 10 GB download; nothing can load it."""
    root = locations.cache_dir() / "described" / DEFAULT_MODEL.replace("/", "--")
    for folder, name in DESCRIBED_CONFIGS.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "config.json").write_text(asset(name).read_text())
    return ModelSource(
        path=root / "model",
        drafter=root / "drafter",
        name=f"{DEFAULT_MODEL} (described by its shipped config, not downloaded)",
    )


def demo_model() -> ModelSource:
    """The trained demo model shipped in ``assets/demo`` (``gemma-chat train-demo``).

    Without it (a trimmed install) the random tiny checkpoint stands in, named as such.
    """
    shipped = ASSETS / "demo"
    if (shipped / GENERATED_MANIFEST).is_file() and (shipped / "model" / "config.json").is_file():
        return ModelSource(path=shipped / "model", drafter=shipped / "drafter", name=DEMO_NAME)
    return generated_model(DEMO_SIZE, DEMO_SEED, f"demo ({DEMO_SIZE}, random weights)")


def generated_model(size: str, seed: int, name: str | None = None) -> ModelSource:
    """A generated checkpoint of ``size`` in the cache, written on first use and then reused."""
    from backend.checkpoints import make_checkpoint
    from backend.checkpoints.output_folder import done_filling, remove_own, start_filling

    root = locations.generated_models_dir() / f"{size}-seed{seed}"
    if not (root / GENERATED_MANIFEST).is_file():
        partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
        remove_own(partial, (GENERATED_MANIFEST,))  # only what gemma-chat made: else refused by name
        start_filling(partial)
        make_checkpoint(partial, size, seed)
        done_filling(partial)
        remove_own(root, (GENERATED_MANIFEST,))
        partial.rename(root)
    return ModelSource(
        path=root / "model",
        drafter=root / "drafter",
        name=name or f"generated {size} (seed {seed}, random weights)",
    )
