"""The app's engines: starting a path's engine in the background, the status bar's engine figures,
F2 (the other path), F3 (compare the next turn) and restarting the engine."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

from textual import work

from app.tui.widgets.status_bar import StatusBar
from backend.engine.paths.values import COMPARED
from backend.engine.protocol import EngineInfo
from backend.engine.remote.server_http import remote_label
from backend.engine.session.pool import SETTLED, EnginePool, EngineState
from backend.engine.session.swap import path_note
from backend.errors import GemmaChatError

PATHS: tuple[str, ...] = (COMPARED[1], COMPARED[0])
"""What F2 cycles through: the compared pair, the optimized path first."""


class EngineHost(Protocol):
    """What the engine actions need of the app they are mixed into."""

    pool: EnginePool
    path: str
    status: StatusBar
    turn: object
    compare_next: bool

    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def start_engine(self, path: str) -> Any: ...
    def _tick(self) -> None: ...
    def _speculation_settled(self, path: str, info: EngineInfo) -> None: ...


class EngineActions:
    """Mixed into ``GemmaChatApp``."""

    @work(group="engines", exit_on_error=False, description="starting the engine")
    async def start_engine(self: EngineHost, path: str) -> None:
        with contextlib.suppress(GemmaChatError):  # the state listener already shows the failure
            target = await self.pool.ensure(path)
            if self.pool.swapper is not None:
                await target.engine.start()  # swap mode: F2 swaps now (after a running turn)

    def _engine_changed(self: EngineHost, state: EngineState) -> None:
        if state.path == self.path:
            self._tick()
        if state.stage == "failed":
            self.notify(f"{state.path} engine: {state.detail}", severity="error", timeout=15)
        if state.info is not None and state.detail == SETTLED:
            self._speculation_settled(state.path, state.info)
        elif state.info is not None:
            self.status.context_window = state.info.max_model_len
            if state.stage == "ready" and state.info.start_note:
                note = f"{state.path} engine: {state.info.start_note}"
                self.notify(note, severity="warning", timeout=15)
            if state.stage == "ready" and state.info.engine_args.get("tokenizer_check"):
                server = state.info.engine_args.get("server")
                self.notify(f"{server} has no /tokenize: the check that it serves this model was skipped.")

    def _speculation_settled(self: EngineHost, path: str, info: EngineInfo) -> None:
        """The engine's speculation, measured when idle, is applied from the next reply on: said once."""
        if info.speculation:
            self.notify(
                f"{path} engine: speculation measured when idle: {info.speculation}; applied from now on."
            )
        elif info.start_note:
            self.notify(f"{path} engine: {info.start_note}", severity="warning", timeout=15)

    def _tick(self: EngineHost) -> None:
        state = self.pool.state(self.path)
        swapping = self.pool.swapper.activity if self.pool.swapper is not None else None
        if swapping:
            self.status.engine, self.status.engine_detail = "swapping", swapping
        elif state.stage == "starting" and state.started_at is not None:
            self.status.engine = state.elapsed_label(time.monotonic())
            self.status.engine_detail = state.detail
        elif state.stage == "failed":
            self.status.engine = "failed"
            self.status.engine_detail = "see the notice; Ctrl+P → restart engine"
        elif state.ready and self.turn is not None:
            self.status.engine, self.status.engine_detail = "replying", ""
        else:
            args = state.info.engine_args if state.info is not None else {}
            measured = (state.info.speculation if state.info else None, self.pool.swapper is not None)
            detail = remote_label(args) or path_note(state.path, args, measured[1], measured[0])
            self.status.engine, self.status.engine_detail = state.stage, detail

    def action_toggle_path(self: EngineHost) -> None:
        self.path = PATHS[(PATHS.index(self.path) + 1) % len(PATHS)] if self.path in PATHS else PATHS[0]
        self.status.path = self.path
        self.notify(f"Next turns run on the {self.path} path.")
        if not self.pool.state(self.path).ready:
            self.start_engine(self.path)
        self._tick()

    def action_compare_next(self: EngineHost) -> None:
        self.compare_next = not self.compare_next
        self.status.compare_next = self.compare_next
        if self.compare_next and self.pool.swapper is None:  # swapping: each path swaps in for its half
            for path in PATHS:
                if not self.pool.state(path).ready:
                    self.start_engine(path)

    @work(group="engines", exit_on_error=False, description="restarting the engine")
    async def restart_engine(self: EngineHost) -> None:
        await self.pool.discard(self.path, "restarting")
        with contextlib.suppress(GemmaChatError):  # the state listener shows the failure
            await self.pool.ensure(self.path)
