"""A comparison's tool results, shared by its two paths: a call one path made is not run again
for the other (whose timeline marks it "reused from the other path"), but a path that repeats
its own call runs it again — a repeated call in one path is not a result from another path, and
in a single-path turn nothing is reused at all.

``SharedResults.view(path)`` is the mapping one path's tool loop reads and writes: it holds the
results the other path ran.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from backend.tools.runner import ToolRecord


class SharedResults:
    def __init__(self) -> None:
        self._records: dict[str, tuple[str, ToolRecord]] = {}

    def view(self, path: str) -> PathResults:
        return PathResults(self._records, path)


class PathResults(MutableMapping[str, ToolRecord]):
    """One path's view: the results of calls another path ran; what this path runs is added."""

    def __init__(self, records: dict[str, tuple[str, ToolRecord]], path: str) -> None:
        self._records, self.path = records, path

    def __getitem__(self, key: str) -> ToolRecord:
        owner, record = self._records[key]
        if owner == self.path:
            raise KeyError(key)
        return record

    def __setitem__(self, key: str, record: ToolRecord) -> None:
        self._records.setdefault(key, (self.path, record))

    def __delitem__(self, key: str) -> None:
        del self._records[key]

    def __iter__(self) -> Iterator[str]:
        return (key for key, (owner, _) in self._records.items() if owner != self.path)

    def __len__(self) -> int:
        return sum(1 for _ in self)
