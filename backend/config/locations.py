"""Every directory gemma-chat reads or writes. Nothing is created at import.

``GEMMA_CHAT_HOME`` puts all of them under one folder (tests and CI use it); otherwise
they follow the platform's conventions (platformdirs).
"""

from __future__ import annotations

import os
from pathlib import Path

from backend.config import switch_rules

APP_NAME = "gemma-chat"
KERNELS_ENV = switch_rules.KERNELS_DIR
"""A folder for the compiled kernels instead of the cache folder's ``kernels/``: homes that share
one compile each kernel once (the tests' homes share one per run)."""


def _home() -> Path | None:
    value = os.environ.get(switch_rules.HOME)
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "config"
    from platformdirs import user_config_path

    return user_config_path(APP_NAME)


def data_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "data"
    from platformdirs import user_data_path

    return user_data_path(APP_NAME)


def cache_dir() -> Path:
    home = _home()
    if home is not None:
        return home / "cache"
    from platformdirs import user_cache_path

    return user_cache_path(APP_NAME)


def kernels_dir() -> Path:
    """Where compiled kernels are kept: ``GEMMA_CHAT_KERNELS_DIR``, else the cache folder's ``kernels/``."""
    shared = os.environ.get(KERNELS_ENV, "").strip()
    return Path(shared).expanduser() if shared else cache_dir() / "kernels"


def generated_models_dir() -> Path:
    """Where ``--demo`` keeps the checkpoints it generates."""
    return cache_dir() / "models"


def logs_dir() -> Path:
    """Engine logs (vLLM's own output), one file per run. Where the cache directory cannot be
    written (a read-only ``GEMMA_CHAT_HOME``), a per-user folder in the system's temporary
    directory instead: a log that cannot be created must not stop the app."""
    wanted = cache_dir() / "logs"
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        if os.access(wanted, os.W_OK):
            return wanted
    except OSError:
        pass
    import tempfile

    return Path(tempfile.gettempdir()) / f"gemma-chat-{os.getuid()}" / "logs"
