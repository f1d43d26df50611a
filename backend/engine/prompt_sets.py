"""Prompt sets shipped in ``assets/`` (parity, benchmarks), turned into engine requests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from backend.assets import asset
from backend.engine.protocol import EngineRequest, SamplingSettings
from backend.gemma4.messages import ChatMessage, MediaKind, PromptRenderer
from backend.media import synthetic


@dataclass(frozen=True)
class SetPrompt:
    id: str
    kind: str
    text: str
    system: str | None = None
    history: tuple[tuple[str, str], ...] = ()
    image: dict[str, int] | None = None
    audio: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def media_kinds(self) -> frozenset[str]:
        return frozenset(k for k, v in (("image", self.image), ("audio", self.audio)) if v)

    def messages(self) -> list[ChatMessage]:
        out = [ChatMessage("system", self.system)] if self.system else []
        out += [ChatMessage("user" if role == "user" else "assistant", text) for role, text in self.history]
        media: tuple[MediaKind, ...] = tuple(k for k in ("image", "audio") if k in self.media_kinds)  # type: ignore[misc]
        out.append(ChatMessage("user", self.text, media=media))
        return out

    def multi_modal_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.image:
            data["image"] = synthetic.image(self.image["seed"], self.image["width"], self.image["height"])
        if self.audio:
            data["audio"] = synthetic.audio(int(self.audio["seed"]), float(self.audio["seconds"]))
        return data

    def request(self, renderer: PromptRenderer, sampling: SamplingSettings, tag: str = "") -> EngineRequest:
        return EngineRequest(
            request_id=f"{tag}{self.id}",
            prompt=renderer.render(self.messages()).text,
            multi_modal_data=self.multi_modal_data(),
            sampling=sampling,
        )


def load_prompt_set(name: str) -> list[SetPrompt]:
    data = json.loads(asset(name).read_text())
    known = {f for f in SetPrompt.__dataclass_fields__ if f != "extra"}
    prompts = []
    for item in data["prompts"]:
        fields = {k: v for k, v in item.items() if k in known}
        fields["history"] = tuple(tuple(turn) for turn in item.get("history", ()))
        prompts.append(SetPrompt(**fields, extra={k: v for k, v in item.items() if k not in known}))
    return prompts


def parity_prompts(modalities: frozenset[str] | None = None) -> list[SetPrompt]:
    """The parity set, without prompts whose media the model cannot take."""
    prompts = load_prompt_set("parity_prompts.json")
    if modalities is None:
        return prompts
    return [p for p in prompts if p.media_kinds <= modalities]
