"""The directories the file tools may read: every path is resolved (symlinks followed) first,
then must lie inside one of them. ``..``, absolute paths elsewhere and symlinks pointing out
are refused with a sentence the model (and the user, in the timeline) can read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


class SandboxError(PermissionError):
    pass


@dataclass(frozen=True)
class Sandbox:
    roots: tuple[Path, ...]

    @classmethod
    def of(cls, directories: Iterable[str | Path]) -> Sandbox:
        return cls(tuple(Path(d).expanduser().resolve() for d in directories))

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative paths start at the first allowed directory)."""
        if not self.roots:
            raise SandboxError(
                "no directory is open to the file tools; the user can allow one with --allow-dir "
                "or tools.allowed_dirs in the settings"
            )
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.roots[0] / candidate
        real = candidate.resolve()
        if not any(real == root or real.is_relative_to(root) for root in self.roots):
            raise SandboxError(f"{path} is outside the allowed directories ({self.describe()})")
        return real

    def describe(self) -> str:
        return ", ".join(str(root) for root in self.roots) or "none"
