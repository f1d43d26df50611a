"""Finding the MTP drafter (``*-assistant``) where users keep it, in this order:

1. ``engine.drafter`` / ``--drafter DIR`` (checked: a Gemma 4 assistant checkpoint, else an error);
2. a generated checkpoint's ``drafter/`` folder (``make-model``, the demo; ``model_source``);
3. inside the model folder: a sub-folder whose ``config.json`` is a Gemma 4 assistant;
4. beside it: ``<model folder>-assistant``, then any sibling ``*-assistant`` assistant checkpoint
   whose width matches the model's;
5. the Hugging Face cache: ``<hub id>-assistant`` (a local folder's hub id is guessed as
   ``google/<folder name>``); a hub model's own assistant is downloaded like the model.

Nothing found is not an error: the note says where it looked, and on a GPU the optimized path then
runs without speculation (never ngram in silence: vLLM turns async scheduling off for ngram, so it
can be slower than the baseline).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from backend.errors import GemmaChatError, NotACheckpoint

ASSISTANT_TYPE = "gemma4_assistant"
SUFFIX = "-assistant"


def _config(directory: Path) -> dict[str, object]:
    try:
        return dict(json.loads((directory / "config.json").read_text()))
    except (OSError, ValueError):
        return {}


def _hidden(config: dict[str, object]) -> object:
    text = config.get("text_config")
    return (text if isinstance(text, dict) else config).get("hidden_size")


def is_assistant(directory: Path, target: Path | None = None) -> bool:
    """A Gemma 4 assistant checkpoint with weights (and, given ``target``, the target's width)."""
    config = _config(directory)
    if config.get("model_type") != ASSISTANT_TYPE:
        return False
    if not any(directory.glob("*.safetensors")):
        return False
    return target is None or config.get("backbone_hidden_size") in (None, _hidden(_config(target)))


def explicit_drafter(directory: Path) -> Path:
    """The drafter set in settings or on the command line: it must be one."""
    if not directory.is_dir():
        raise NotACheckpoint(f"The drafter {directory} is not a folder.", "Fix --drafter / engine.drafter.")
    if not is_assistant(directory):
        raise NotACheckpoint(
            f"{directory} is not a Gemma 4 assistant (drafter) checkpoint: its config.json must say "
            f'model_type "{ASSISTANT_TYPE}" and it needs *.safetensors.',
            "Point --drafter at a downloaded google/gemma-4-E2B-it-assistant (or unset it).",
        )
    return directory.resolve()


def _inside(path: Path) -> Path | None:
    children = sorted(c for c in path.iterdir() if c.is_dir()) if path.is_dir() else []
    return next((c for c in children if is_assistant(c, path)), None)


def _siblings(path: Path) -> Path | None:
    exact = path.parent / f"{path.name}{SUFFIX}"
    if is_assistant(exact, path):
        return exact
    try:
        others = sorted(p for p in path.parent.glob(f"*{SUFFIX}") if p.is_dir() and p != exact)
    except OSError:
        return None
    return next((p for p in others if is_assistant(p, path)), None)


def _hub_cache(repo_id: str, download: Callable[[str], Path] | None) -> Path | None:
    """``repo_id`` from the Hugging Face cache, or downloaded with ``download`` where given."""
    if download is not None:
        try:
            return download(repo_id)
        except GemmaChatError:  # not downloadable: no drafter
            return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not in the cache
        return None


def find_drafter(
    path: Path, hub_id: str | None, download: Callable[[str], Path] | None = None
) -> tuple[Path | None, str]:
    """The drafter for the checkpoint at ``path`` (``hub_id``: how it was named, if from the hub;
    ``download``: fetches a hub id, for a hub model's own assistant), and a note saying where it
    was found or where it was looked for."""
    for where, found in (
        ("inside the model folder", _inside(path)),
        ("beside the model folder", _siblings(path)),
    ):
        if found is not None:
            return found, f"{where}: {found}"
    repo = f"{hub_id or 'google/' + path.name}{SUFFIX}"
    cached = _hub_cache(
        repo, download if hub_id is not None and hub_id.startswith("google/gemma-4") else None
    )
    if cached is not None and is_assistant(cached, path):
        return cached, f"the Hugging Face cache: {repo}"
    return None, (
        f"no MTP drafter found (looked inside {path}, beside it for {path.name}{SUFFIX}, and for {repo} "
        "in the Hugging Face cache); give one with --drafter DIR or drafter = ... in [engine]"
    )
