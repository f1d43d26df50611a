"""The benchmark's prompt workloads (``assets/bench/workloads.json``), loaded into typed values.

``throughput``: single-turn prompts sent together; ``chat``: conversations replayed one user turn
at a time, each after the model's reply to the previous one; ``media``: prompts with one
attachment made deterministically by a generator in ``backend.media.synthetic``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.assets import asset
from backend.media import synthetic

WORKLOADS_ASSET = "bench/workloads.json"
MAX_AUDIO_SECONDS = 30.0  # Gemma 4 truncates longer audio (750 tokens of 40 ms)
GENERATORS: dict[str, tuple[str, Callable[..., Any]]] = {
    "backend.media.synthetic.image": ("image", synthetic.image),
    "backend.media.synthetic.audio": ("audio", synthetic.audio),
}


@dataclass(frozen=True)
class ThroughputPrompt:
    id: str
    category: str
    text: str


@dataclass(frozen=True)
class ChatConversation:
    id: str
    turns: tuple[str, ...]
    """The user's turns, in order; the model's replies come from the engine under test."""


@dataclass(frozen=True)
class MediaSpec:
    kind: str
    generator: str
    args: Mapping[str, int | float]

    def make(self) -> Any:
        """The attachment: a PIL image, or ``(float32 samples, rate)`` for audio."""
        return GENERATORS[self.generator][1](**self.args)


@dataclass(frozen=True)
class MediaPrompt:
    id: str
    text: str
    media: MediaSpec

    def multi_modal_data(self) -> dict[str, Any]:
        """The attachment in vLLM's ``multi_modal_data`` form."""
        return {self.media.kind: self.media.make()}


@dataclass(frozen=True)
class Workloads:
    throughput: tuple[ThroughputPrompt, ...]
    chat: tuple[ChatConversation, ...]
    media: tuple[MediaPrompt, ...]


def load_workloads(path: Path | str | None = None) -> Workloads:
    """Read and validate a workloads file (default: the shipped asset); ``ValueError`` says what is wrong."""
    source = Path(path) if path is not None else asset(WORKLOADS_ASSET)
    try:
        data = json.loads(source.read_text())
        workloads = Workloads(
            throughput=tuple(_throughput(item) for item in _list(data, "throughput")),
            chat=tuple(_conversation(item) for item in _list(data, "chat")),
            media=tuple(_media_prompt(item) for item in _list(data, "media")),
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"workloads file {source}: {_describe(error)}") from error
    ids = [w.id for group in (workloads.throughput, workloads.chat, workloads.media) for w in group]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"workloads file {source}: duplicate ids {', '.join(duplicates)}")
    return workloads


def _describe(error: Exception) -> str:
    return f"missing field {error}" if isinstance(error, KeyError) else str(error)


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    items = data.get(key, [])
    if not isinstance(items, list):
        raise ValueError(f"{key!r} must be a list")
    return items


def _text(item: Mapping[str, Any], key: str) -> str:
    value = item[key]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"entry {item.get('id', '?')!r}: {key!r} must be non-empty text")
    return value


def _throughput(item: Mapping[str, Any]) -> ThroughputPrompt:
    return ThroughputPrompt(id=_text(item, "id"), category=_text(item, "category"), text=_text(item, "text"))


def _conversation(item: Mapping[str, Any]) -> ChatConversation:
    entry, turns = _text(item, "id"), item["turns"]
    if not isinstance(turns, list) or len(turns) < 2:
        raise ValueError(f"entry {entry!r}: 'turns' must list at least two user turns")
    if any(not isinstance(turn, str) or not turn.strip() for turn in turns):
        raise ValueError(f"entry {entry!r}: every turn must be non-empty text")
    return ChatConversation(id=entry, turns=tuple(turns))


def _media_prompt(item: Mapping[str, Any]) -> MediaPrompt:
    entry = _text(item, "id")
    spec = item["media"]
    kind, generator, args = spec["kind"], spec["generator"], dict(spec.get("args", {}))
    if generator not in GENERATORS:
        raise ValueError(f"entry {entry!r}: unknown generator {generator!r}; known: {', '.join(GENERATORS)}")
    made_kind, function = GENERATORS[generator]
    if kind != made_kind:
        raise ValueError(f"entry {entry!r}: generator {generator} makes {made_kind}, not {kind!r}")
    try:
        inspect.signature(function).bind(**args)
    except TypeError as error:
        raise ValueError(f"entry {entry!r}: bad args for {generator}: {error}") from error
    if any(not isinstance(v, int | float) or v < 0 for v in args.values()):
        raise ValueError(f"entry {entry!r}: args must be non-negative numbers")
    if kind == "image" and min(args["width"], args["height"]) < 1:
        raise ValueError(f"entry {entry!r}: an image needs a width and height of at least 1 pixel")
    if kind == "audio" and not 0 < args["seconds"] <= MAX_AUDIO_SECONDS:
        raise ValueError(f"entry {entry!r}: audio must last between 0 and {MAX_AUDIO_SECONDS:g} s")
    return MediaPrompt(id=entry, text=_text(item, "text"), media=MediaSpec(kind, generator, args))
