"""Asking before a tool runs: allow once, always for this chat, or deny."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from app.tui.untrusted import escaped, literal
from backend.gemma4.tool_call import ToolCall
from backend.tools.runner import Decision
from backend.tools.spec import Tool


class ApprovalScreen(ModalScreen[Decision]):
    BINDINGS = [
        Binding("o", "decide('once')", "Allow once"),
        Binding("a", "decide('always')", "Always for this chat"),
        Binding("d,escape", "decide('deny')", "Deny"),
    ]

    def __init__(self, call: ToolCall, tool: Tool) -> None:
        super().__init__()
        self.call, self.tool = call, tool

    def compose(self) -> ComposeResult:
        effects = "It has side effects." if self.tool.side_effects else "It only reads or computes."
        with Vertical(id="dialog", classes="approval"):
            yield Label(f"The model wants to run [b]{escaped(self.tool.name)}[/b]", classes="title")
            yield Static(literal(f"{self.tool.description} {effects}"), classes="muted")
            arguments = json.dumps(self.call.arguments, indent=2, ensure_ascii=False)
            yield Static(literal(arguments), classes="tool-args")
            with Horizontal(classes="buttons"):
                yield Button("Allow once (o)", id="once", variant="primary")
                yield Button("Always for this chat (a)", id="always")
                yield Button("Deny (d)", id="deny", variant="error")

    def on_mount(self) -> None:
        self.query_one("#once", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_decide(event.button.id or "deny")

    def action_decide(self, decision: str) -> None:
        self.dismiss(decision if decision in ("once", "always") else "deny")  # type: ignore[arg-type]
