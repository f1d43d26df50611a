"""Chat messages and their rendering into a prompt with the model's own chat template."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from backend.gemma4 import template_bounds
from backend.gemma4.defuse import defuse, special_pattern, tokenizer_specials
from backend.gemma4.template_messages import template_messages

Role = Literal["system", "user", "assistant", "tool"]
MediaKind = Literal["image", "audio", "video"]
IMAGE_PLACEHOLDER = "<|image|>"
"""Gemma 4's image placeholder, where a template part cannot carry the image (a tool response)."""


def valid_utf8(text: str) -> str:
    """``text`` as valid UTF-8: bytes that were not (a file name's, kept as lone surrogates by
    Python) are shown as ``\\xNN`` escapes, so the tokenizer and the database can take it."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        return text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    text: str
    media: tuple[MediaKind, ...] = ()
    """Kinds of the attachments of this message, in order (their placeholders come first)."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """OpenAI-style calls of an assistant message: ``{"type": "function", "function": {name, arguments}}``."""
    name: str | None = None
    """The tool's name, for a ``tool`` message."""
    data: Any = None
    """A ``tool`` message's structured response (rendered instead of ``text`` when set)."""
    images: tuple[str, ...] = ()
    """Image files a ``tool`` message's result carried (given to the model in the turn they came)."""

    thought: str = ""
    """An assistant message's thinking (Gemma 4's ``<|channel>thought`` block), kept apart from
    ``text``; the chat template decides whether the model sees it again."""


@dataclass(frozen=True)
class RenderedPrompt:
    text: str
    """The prompt as the template wrote it, ``<bos>`` included: vLLM adds no special tokens to it."""
    token_count: int
    """Text tokens; each media placeholder counts one here (vLLM expands it)."""


@dataclass
class PromptRenderer:
    """Renders messages with a tokenizer's chat template (the model's own)."""

    tokenizer: Any
    tools: list[dict[str, Any]] = field(default_factory=list)
    folder: str = "the model folder"
    """Where the tokenizer and its template came from (named in every template error)."""
    _special_pattern: re.Pattern[str] | None = field(default=None, repr=False)

    @classmethod
    def for_model(cls, model_dir: str) -> PromptRenderer:
        from transformers import AutoTokenizer

        from backend.errors import NotACheckpoint

        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
        except (OSError, ValueError, TypeError, KeyError, ImportError) as error:
            raise NotACheckpoint(
                f"The tokenizer of {model_dir} could not be loaded: {str(error).splitlines()[0][:300]}",
                "The folder needs the model's tokenizer files (tokenizer.json, tokenizer_config.json) "
                "intact, as published with the model.",
            ) from None
        return cls(tokenizer=tokenizer, folder=model_dir)

    def _specials(self) -> re.Pattern[str] | None:
        """The tokenizer's special tokens as one pattern (built once)."""
        if self._special_pattern is None:
            self._special_pattern = special_pattern(tokenizer_specials(self.tokenizer)) or re.compile("(?!)")
        return self._special_pattern

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        """The prompt for ``messages``; ``tools`` (declarations) override the renderer's own;
        ``think`` turns on Gemma 4's thinking mode (the template's ``enable_thinking``)."""
        declared = defuse(tools if tools is not None else self.tools, self._specials())  # text from servers
        text = template_bounds.render(
            self.folder,
            self.tokenizer.chat_template,
            lambda: self.tokenizer.apply_chat_template(
                defuse(template_messages(messages), self._specials()),
                tools=declared or None,
                tokenize=False,
                add_generation_prompt=True,
                enable_thinking=think,
            ),
        )
        text = valid_utf8(text)  # a last guard: whatever reached a message, the prompt is UTF-8
        count = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return RenderedPrompt(text=text, token_count=count)
