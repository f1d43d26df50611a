"""What the model wrote, read as Gemma 4 writes it: thinking, answer text and tool calls.

A reply decoded with its special tokens may hold a thought channel,
``<|channel>thought\\n…<channel|>``, before the answer (thinking mode), or start inside one when
the prompt opened it (the published template ends a prompt after tool results with
``<|channel>thought\\n`` in thinking mode). A thought also ends at a tool call that follows it
without ``<channel|>``. Some checkpoints write a bare ``thought\\n`` label without thinking mode;
it is dropped, as vLLM's ``parse_thinking_output`` drops it. Text before a lone ``<channel|>``
is thought too where thinking was asked for. ``read_reply`` splits a whole reply; ``ReplyStream`` does it
while the reply streams, handing out only text that will not be taken back (a possibly
unfinished marker, label or call is held until it is known).
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.gemma4.call_format import CALL_OPEN, parse_output
from backend.gemma4.tool_call import ToolCall

CHANNEL_OPEN = "<|channel>"
CHANNEL_CLOSE = "<channel|>"
LABEL = "thought\n"
MARKERS = (CHANNEL_OPEN, CHANNEL_CLOSE, CALL_OPEN, "<tool_call|>", "<|tool_response>", "<tool_response|>",
           "<|turn>", "<turn|>", "<eos>", '<|"|>')  # fmt: skip
"""Special tokens a reply may hold; a server may split one across two chunks."""


@dataclass(frozen=True)
class Reply:
    answer: str
    """What the user reads: the text outside thoughts and calls, markers removed."""
    thought: str
    """The thinking, its label removed ("" when there was none)."""
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Prompted:
    """What a reply's prompt says about how to read the reply."""

    thought_open: bool = False
    """The prompt ends inside an open thought channel: the reply starts in it."""
    thinking: bool = False
    """Thinking mode was asked for (``<|think|>``): a lone ``<channel|>`` ends a thought."""

    @classmethod
    def by(cls, prompt: str) -> Prompted:
        opened = prompt.rfind(CHANNEL_OPEN)
        closers = (CHANNEL_CLOSE, CALL_OPEN, "<|turn>", "<|tool_response>", "<turn|>")
        inside = opened != -1 and all(prompt.rfind(marker) < opened for marker in closers)
        return cls(thought_open=inside, thinking="<|think|>" in prompt)


def read_reply(text: str, prompted: Prompted = Prompted(), *, complete: bool = False) -> Reply:
    """``text`` split into answer, thought and calls (``complete``: the model ended it itself)."""
    thoughts, rest = split_thought(text, prompted)
    parsed = parse_output(rest, complete=complete)
    return Reply(_without_label(parsed.content), "\n\n".join(thoughts), parsed.calls)


def split_thought(text: str, prompted: Prompted = Prompted()) -> tuple[list[str], str]:
    """The thought blocks of ``text`` (labels removed, empty ones dropped) and the rest of it.

    Text before a ``<channel|>`` that no ``<|channel>`` opened is thought where thinking was
    asked for or the text starts with the ``thought`` label (vLLM reads it as thought always; a
    stray marker after a plain answer would then hide the whole answer)."""
    lone = CHANNEL_CLOSE in text and CHANNEL_OPEN not in text.split(CHANNEL_CLOSE)[0]
    labelled = text.lstrip().startswith(LABEL)
    inside = prompted.thought_open or (lone and (prompted.thinking or labelled))
    thoughts: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(text):
        if not inside:
            start = text.find(CHANNEL_OPEN, i)
            rest.append(text[i:] if start == -1 else text[i:start])
            if start == -1:
                break
            after = start + len(CHANNEL_OPEN)
            if not prompted.thinking and not _opens_thought(text[after:]):
                rest.append(CHANNEL_OPEN)  # without thinking mode, a marker that opens no thought is text
                i = after
                continue
            inside, i = True, after
            continue
        close, call = text.find(CHANNEL_CLOSE, i), text.find(CALL_OPEN, i)
        ends = [e for e in (close, call) if e != -1]
        end = min(ends) if ends else len(text)
        thoughts.append(text[i:end])
        inside = False
        i = end + len(CHANNEL_CLOSE) if end == close and ends else end
    kept = [_without_label(t.strip()) for t in thoughts]
    return [t for t in kept if t and not LABEL.startswith(t)], "".join(rest).replace(CHANNEL_CLOSE, "")


def _opens_thought(after: str) -> bool:
    """Whether the text after a ``<|channel>`` is (or may still become) a thought block: the
    ``thought`` label, an empty block's ``<channel|>``, or too little text yet to tell."""
    head = after.lstrip()
    return (
        head.startswith(LABEL)
        or head.startswith(CHANNEL_CLOSE)
        or LABEL.startswith(head)
        or CHANNEL_CLOSE.startswith(head)
    )


def _without_label(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith(LABEL):
        return stripped[len(LABEL) :].strip()
    return text


def _complete_markers(text: str) -> str:
    """``text`` less a tail that may be the start of a marker split across chunks (``<|tool_c``)."""
    start = text.rfind("<")
    tail = text[start:] if start != -1 else ""
    if tail and ">" not in tail and any(m.startswith(tail) for m in MARKERS):
        return text[:start]
    return text


def _held(text: str) -> str:
    """``text`` less a tail that may still turn into the label (``thought`` before its newline)."""
    stripped = text.lstrip()
    return "" if stripped and LABEL.startswith(stripped) else text


@dataclass(frozen=True)
class Piece:
    """New text of a streaming reply: for the answer and for the thought block."""

    answer: str = ""
    thought: str = ""


class ReplyStream:
    """A reply's pieces while it streams, across the steps of a tool turn (``next_step``)."""

    def __init__(self, prompted: Prompted = Prompted()) -> None:
        self._raw = ""
        self.prompted = prompted
        """What the current step's prompt says (``next_step`` sets it)."""
        self._answer = self._thought = ""
        self._answer_before = self._thought_before = False
        self._calls_from: int | None = None
        """Where the step's first tool call opened (None: none yet)."""
        self.thought_tokens = 0
        """Tokens that went to the thought block (the rest of the reply's tokens are the answer's)."""

    def feed(self, delta: str, tokens: int = 0) -> Piece:
        """What ``delta`` adds to the reply as shown. Once a tool call has opened, the text is no
        longer read while it streams (a reply of a thousand calls would be read a thousand times
        over); the step's end shows whatever followed the calls (``flush``)."""
        since = max(0, len(self._raw) - len(CALL_OPEN) + 1)
        self._raw += delta
        if self._in_thought(delta):
            self.thought_tokens += tokens
        if self._calls_from is not None:
            return Piece("", "")
        at = self._raw.find(CALL_OPEN, since)
        if at != -1:
            self._calls_from = at
        text = self._raw if at == -1 else self._raw[:at]
        reply = read_reply(_complete_markers(text), self.prompted)
        return self._show(_held(reply.answer), reply.thought)

    def flush(self, answer: str, thought: str) -> Piece:
        """What is left to show of a step's final ``answer`` and ``thought`` (held tails included)."""
        return self._show(answer, thought)

    def _show(self, answer: str, thought: str) -> Piece:
        new_answer = self._advance(answer, self._answer, self._answer_before)
        new_thought = self._advance(thought, self._thought, self._thought_before)
        if new_answer:
            self._answer = answer
        if new_thought:
            self._thought = thought
        return Piece(new_answer, new_thought)

    @staticmethod
    def _advance(now: str, shown: str, earlier_steps: bool) -> str:
        if not now.startswith(shown) or len(now) == len(shown):
            return ""
        new = now[len(shown) :]
        return "\n\n" + new if not shown and earlier_steps else new

    def _in_thought(self, delta: str) -> bool:
        """Whether the text just fed belongs to a thought: open at its end, or closed by it."""
        opened = self._raw.rfind(CHANNEL_OPEN)
        closed = max(self._raw.rfind(CHANNEL_CLOSE), self._raw.rfind(CALL_OPEN))
        inside = opened > closed or (self.prompted.thought_open and closed == -1)
        closing = self._raw.find(CHANNEL_CLOSE, max(0, len(self._raw) - len(delta) - len(CHANNEL_CLOSE) + 1))
        return inside or closing != -1

    def next_step(self, prompted: Prompted = Prompted()) -> None:
        """A new model step of the same turn (after tool results) begins."""
        self._answer_before = self._answer_before or bool(self._answer)
        self._thought_before = self._thought_before or bool(self._thought)
        self._raw, self._answer, self._thought = "", "", ""
        self._calls_from = None
        self.prompted = prompted


def empty_answer_note(answer: str, thought: str, finish_reason: str | None) -> str | None:
    """What to tell the user of a reply that ended without an answer to read (None: it has one)."""
    if answer.strip():
        return None
    budget = " — the reply budget ran out; raise --max-tokens" if finish_reason == "length" else ""
    if thought.strip():
        return f"The model thought but gave no answer{budget}."
    return f"The model ended its reply without any text{budget}."
