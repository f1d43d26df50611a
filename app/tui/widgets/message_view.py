"""One message: a header, the Markdown body (streamed; code written outside a fence shown as code
once whole), and for replies a live figures footer."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Markdown, Sparkline, Static

from app.tui.untrusted import literal
from app.tui.widgets.markdown_stream import ThrottledMarkdownStream
from app.tui.widgets.preview import preview
from app.tui.widgets.thought_block import ThoughtBlock
from app.tui.widgets.tool_block import ToolBlock
from backend.chat.code_text import code_as_code
from backend.engine.metrics import TurnMetrics
from backend.gemma4.tool_call import ToolCall
from backend.media.attachment import Attachment
from backend.terminal_text import terminal_safe
from backend.tools.runner import ToolRecord
from backend.tools.timeline import duration_text


def figures_line(metrics: TurnMetrics | None, path: str | None, tool_s: float | None = None) -> str:
    if metrics is None:
        return f"{path or ''}"
    parts = [path or ""]
    if metrics.decode_tokens_per_s is not None:
        parts.append(f"{metrics.decode_tokens_per_s:.1f} tok/s")
    elif metrics.rolling_decode_tokens_per_s is not None:
        parts.append(f"{metrics.rolling_decode_tokens_per_s:.1f} tok/s")
    if metrics.ttft_s is not None:
        parts.append(f"TTFT {metrics.ttft_s * 1000:.0f} ms")
    if metrics.prefill_tokens_per_s is not None:
        parts.append(f"prefill {metrics.prefill_tokens_per_s:.0f} tok/s")
    thought = f" ({metrics.thought_tokens} thought)" if metrics.thought_tokens else ""
    parts.append(f"{metrics.generated_tokens} tokens{thought}")
    if metrics.drafted_tokens:
        rate = (metrics.accepted_tokens or 0) / metrics.drafted_tokens
        parts.append(f"spec {rate:.0%} accepted")
        if metrics.step_tokens:
            per_step = sum(size for size, _ in metrics.step_tokens) / len(metrics.step_tokens)
            parts.append(f"{per_step:.2f} tokens/step (F7)")
        elif metrics.mean_acceptance_length is not None:  # streaming: the engine's count so far
            parts.append(f"{metrics.mean_acceptance_length:.2f} tokens/drafted step")
    if metrics.kv_cache_usage is not None:
        parts.append(f"KV {metrics.kv_cache_usage:.0%}")
    if tool_s is not None:  # a turn that called tools: model time and tool time apart
        if metrics.e2e_s is not None:
            parts.append(f"model {duration_text(metrics.e2e_s)}")
        parts.append(f"tools {duration_text(tool_s)}")
    return " · ".join(p for p in parts if p)


PREVIEW_COLUMNS = 32
PREVIEW_ROWS = 8
"""How large an attachment shows in a sent message, in cells at most."""
SHOWN_CHARS = 20_000
"""A message of yours shows at most this much (a pasted megabyte took the screen minutes to lay
out); all of it is sent, stored and exported."""


def shown(text: str, role: str) -> str:
    """What the chat shows of a message: yours cut at ``SHOWN_CHARS``, saying how much more there is."""
    if role != "user" or len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}\n\n*… {len(text) - SHOWN_CHARS:,} more characters, sent in full*"


def chat_markdown() -> MarkdownIt:
    """Textual's parser, with a line break kept where the text has one.

    Plain Markdown joins a paragraph's lines with spaces; a model's reply (and the demo model's
    unfenced Python) means its line breaks, as chat apps show them.
    """
    parser = MarkdownIt("gfm-like")
    parser.core.ruler.push("kept_line_breaks", _hard_breaks)
    return parser


def _hard_breaks(state: StateCore) -> None:
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"


class MessageView(Vertical):
    """A user message or a reply; replies stream with ``append`` and end with ``finish``."""

    def __init__(
        self,
        role: str,
        text: str = "",
        path: str | None = None,
        metrics: TurnMetrics | None = None,
        attachments: tuple[Attachment, ...] = (),
        tool_records: tuple[ToolRecord, ...] = (),
        tool_seconds: float | None = None,
        status: str = "",
        thought: str = "",
    ) -> None:
        super().__init__(classes=f"message {role}")
        self.role = role
        self.text = text
        self.path = path
        self.metrics = metrics
        self.attachments = attachments
        self.status = status
        """How a stored reply ended when it did not simply finish (``stopped``, ``failed``)."""
        self._stream: ThrottledMarkdownStream | None = None
        self._rates: list[float] = []
        self.thought = ThoughtBlock(thought, metrics.thought_tokens if metrics else 0)
        self.tool_records = tool_records
        self.tool_seconds = tool_seconds
        self._blocks: dict[int, ToolBlock] = {}
        self.token_ids: tuple[int, ...] = ()
        """The reply's tokens as this session's engine gave them (F7 shows its accepted drafts)."""

    def compose(self) -> ComposeResult:
        yield Label(literal("You" if self.role == "user" else f"Gemma · {self.path or ''}"), classes="role")
        if self.attachments:
            counts: dict[str, int] = {}
            chips = []
            for a in self.attachments:
                counts[a.kind] = counts.get(a.kind, 0) + 1
                chips.append(f"[{a.kind.capitalize()} #{counts[a.kind]} {a.detail} · {a.tokens} tok]")
            yield Label(literal(" ".join(chips)), classes="attachments")
            previews = [p for a in self.attachments if (p := preview(a, PREVIEW_COLUMNS, PREVIEW_ROWS))]
            if previews:
                yield Horizontal(*previews, classes="previews")
        tools = Vertical(*(ToolBlock(record=r) for r in self.tool_records), classes="tools")
        tools.display = bool(self.tool_records)
        yield tools
        yield self.thought
        yield Markdown(
            terminal_safe(code_as_code(shown(self.text, self.role))),
            classes="body",
            parser_factory=chat_markdown,
        )
        if self.role != "user":
            yield Sparkline([], classes="spark")
            line = figures_line(self.metrics, self.path, self.tool_seconds)
            yield Static(literal(f"{line} · {self.status}" if self.status else line), classes="figures")

    @property
    def body(self) -> Markdown:
        return self.query_one(".body", Markdown)

    async def append(self, fragment: str, thought: str = "") -> None:
        """Add streamed answer text (Markdown) and thought text (to the collapsed block above it);
        the turn pipeline has already taken out tool calls and turn markers."""
        if thought:
            self.thought.append(thought)
        if not fragment:
            return
        if self._stream is None:
            self._stream = ThrottledMarkdownStream(self.body)
        self.text += fragment
        self._stream.write(terminal_safe(fragment))

    def settle(self, text: str, thought: str) -> None:
        """The reply as finally read (a marker may have re-sorted text that had streamed)."""
        self.text = text
        if thought != self.thought.text:
            self.thought.set(thought)

    async def add_tool_call(self, index: int, call: ToolCall) -> None:
        """A call starts: its block joins the timeline (the next model step streams after it)."""
        block = ToolBlock(call)
        self._blocks[index] = block
        tools = self.query_one(".tools", Vertical)
        tools.display = True
        await tools.mount(block)

    def finish_tool_call(self, index: int, record: ToolRecord) -> None:
        if index in self._blocks:
            self._blocks[index].finish(record)
        self.tool_records = (*self.tool_records, record)
        self.tool_seconds = sum(r.duration_s for r in self.tool_records if not r.reused)

    def show_note(self, note: str) -> None:
        """A line in the figures footer before any figure exists (e.g. waiting for the engine)."""
        self.query_one(".figures", Static).update(literal(f"{self.path or ''} · {note}"))

    def show_metrics(self, metrics: TurnMetrics) -> None:
        self.metrics = metrics
        if metrics.rolling_decode_tokens_per_s is not None:
            self._rates.append(metrics.rolling_decode_tokens_per_s)
            self.query_one(".spark", Sparkline).data = self._rates[-60:]
        self.query_one(".figures", Static).update(figures_line(metrics, self.path, self.tool_seconds))

    async def finish(self, metrics: TurnMetrics | None, status: str = "") -> None:
        """End the stream and render the whole text once (code fences come out right)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        await self.body.update(terminal_safe(code_as_code(self.text)))
        self.status = status
        if self.role != "user":
            self.query_one(".spark", Sparkline).display = False
            line = figures_line(metrics, self.path, self.tool_seconds)
            self.query_one(".figures", Static).update(literal(f"{line} · {status}" if status else line))
            if metrics is not None:
                self.metrics = metrics
                self.thought.set(self.thought.text, metrics.thought_tokens)

    async def add_note(self, note: str) -> None:
        """A line below the reply that says something about it (not part of its text)."""
        await self.mount(Static(literal(note), classes="note"))

    async def fail(self, message: str) -> None:
        """End the reply with an error block; whatever streamed before stays above it."""
        await self.finish(self.metrics, "failed")
        await self.mount(Static(literal(message), classes="error"))

    def last_code_block(self) -> str | None:
        """The last code block as shown: fenced, or code written outside a fence."""
        blocks = code_as_code(self.text).split("```")
        if len(blocks) < 3:
            return None
        code = blocks[-2] if len(blocks) % 2 == 1 else blocks[-3]
        first, _, rest = code.partition("\n")
        return rest if first.strip() and " " not in first.strip() else code
