"""vLLM's engine-core process starts while gemma-chat is still importing vLLM.

vLLM's CPU build starts its engine core with the ``spawn`` start method: a fresh interpreter
that imports torch and vLLM again (7 s on the development machine) after this process has
imported them (6 s), one after the other. ``prestart`` launches that interpreter when an engine
start begins, with the environment the engine core will be given, and lets it import torch and
vLLM beside this process's own imports; it then waits, exactly as a spawned child waits for its
process object. When vLLM starts its engine-core process, ``spawn`` hands the process to the
waiting interpreter instead of launching a new one: the same preparation data and pickled process
object over the same kind of pipe, read by multiprocessing's own ``spawn_main``. From there on the
child is a spawned engine core (its parent is this process, its sentinel the pipe's end).

It hands over only where the child cannot tell the difference: the process is vLLM's engine core;
the environment is the one the waiting interpreter runs with, variable for variable (vLLM sets
some while it starts: ``backend.engine.local.start_env`` learns them from the previous start); standard
error is the same file; nothing needs passing but the pipe and the resource tracker's descriptor.
Otherwise the waiting interpreter is ended and vLLM spawns as always. A start that never reaches
the spawn ends the waiting interpreter too (``Waiting.end``).

Standard library only at import: the waiting interpreter imports it before torch and vLLM.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing import context as _context
from multiprocessing import popen_spawn_posix, resource_tracker, spawn
from multiprocessing import util as _util
from typing import Any

from backend.config import switch_rules
from backend.config.switch_rules import early_core

VARIABLE = switch_rules.EARLY_CORE
"""Set to 0, false, off or no (any case): spawn vLLM's engine core the usual way (1, true, yes, on:
early; anything else is refused)."""


def turned_off() -> bool:
    """Whether the user turned the early start off (``VARIABLE``)."""
    return not early_core()


# multiprocessing's internals this module works with have no (or partial) type stubs.
context: Any = _context
util: Any = _util
_SpawnPopen: Any = popen_spawn_posix.Popen
_tracker: Any = resource_tracker

PRELOAD = (
    "torch",
    "vllm",
    "vllm.v1.engine.core",
    "vllm.v1.executor.uniproc_executor",
    "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.cpu_worker",
    "vllm.v1.worker.cpu_model_runner",
    "vllm.model_executor.models.gemma4_mm",
)
"""What the waiting interpreter imports before it waits (what unpickling the engine core needs)."""
ENGINE_CORE_TARGET = "EngineCoreProc.run_engine_core"
_LENGTH = struct.Struct("!Q")
_PROGRAM = (
    "from backend.compat.processes.early_core import child_main; "
    "child_main({pipe}, {tracker}, {read_env}, {preload!r})"
)


@dataclass
class Waiting:
    """A prestarted interpreter waiting for its process object."""

    pid: int
    parent_r: int
    """The read end of the pipe the child holds the write end of: the process's sentinel."""
    parent_w: int
    """Where the preparation data and process object go."""
    tracker_fd: int
    env: dict[str, str]
    stderr: tuple[int, int]
    ended: bool = False
    """Ended by ``end``, or handed its process object (from then on it is the spawn's child)."""
    said: list[str] = field(default_factory=list)
    """Why it was not handed over (or that it was), for the engine log."""

    def alive(self) -> bool:
        if self.ended:
            return False
        try:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def mismatch(self, process_obj: Any) -> str | None:
        """Why ``process_obj`` may not go to this interpreter (None: it may)."""
        if not _is_engine_core(process_obj):
            return f"not vLLM's engine core ({_target_name(process_obj) or 'no target'})"
        now = dict(os.environ)
        if now != self.env:
            changed = sorted(k for k in now.keys() | self.env.keys() if now.get(k) != self.env.get(k))
            return "the environment differs in " + ", ".join(changed)
        if _stderr_identity() != self.stderr:
            return "standard error is another file"
        if _tracker.getfd() != self.tracker_fd:
            return "multiprocessing's resource tracker was restarted"
        if not self.alive():
            return "the waiting interpreter has ended"
        return None

    def end(self) -> None:
        """End the interpreter (unless it was handed over) and close this side's descriptors."""
        if self.ended:
            return
        self.ended = True
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        for fd in (self.parent_r, self.parent_w):
            with contextlib.suppress(OSError):
                os.close(fd)


_lock = threading.Lock()
_slot: Waiting | None = None
"""The interpreter the next engine-core spawn may take (one start at a time sets it)."""
_ORIGINAL_POPEN: Callable[[Any], Any] = context.SpawnProcess._Popen
"""``spawn``'s own Popen factory (what every other process, and a mismatch, gets)."""
_seen: dict[str, str] | None = None
"""The environment the last engine core was spawned with (``withdraw`` hands it out)."""


def _target_name(process_obj: Any) -> str:
    return str(getattr(getattr(process_obj, "_target", None), "__qualname__", ""))


def _is_engine_core(process_obj: Any) -> bool:
    return _target_name(process_obj).endswith(ENGINE_CORE_TARGET)


def _stderr_identity() -> tuple[int, int]:
    try:
        info = os.fstat(2)
    except OSError:
        return (-1, -1)
    return (info.st_dev, info.st_ino)


def _command(pipe: int, tracker: int, read_env: bool, preload: tuple[str, ...]) -> list[str]:
    program = _PROGRAM.format(pipe=pipe, tracker=tracker, read_env=read_env, preload=",".join(preload))
    return [
        spawn.get_executable(),
        *util._args_from_interpreter_flags(),
        "-c",
        program,
        "--multiprocessing-fork",
    ]


def prestart(env: Mapping[str, str], preload: tuple[str, ...] = PRELOAD) -> Waiting:
    """Launch an interpreter that imports ``preload`` (torch and vLLM) under ``env``, then waits."""
    resource_tracker.ensure_running()
    tracker_fd: int = _tracker.getfd()
    parent_r, child_w = os.pipe()
    child_r, parent_w = os.pipe()
    try:
        pid = util.spawnv_passfds(
            spawn.get_executable(),
            _command(child_r, tracker_fd, True, preload),
            [tracker_fd, child_r, child_w],
        )
    except BaseException:
        for fd in (parent_r, child_w, child_r, parent_w):
            os.close(fd)
        raise
    os.close(child_r)
    os.close(child_w)
    waiting = Waiting(pid, parent_r, parent_w, tracker_fd, dict(env), _stderr_identity())
    blob = json.dumps(waiting.env).encode()
    try:
        os.write(parent_w, _LENGTH.pack(len(blob)))
        _write_all(parent_w, blob)
    except OSError:
        waiting.end()
    return waiting


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, size - len(chunks))
        if not chunk:
            raise EOFError("the parent closed the pipe before the environment came")
        chunks += chunk
    return bytes(chunks)


def child_main(pipe: int, tracker: int, read_env: bool, preload: str) -> None:
    """The waiting interpreter: take the environment, import, then be a spawned child."""
    if read_env:
        (size,) = _LENGTH.unpack(_read_exact(pipe, _LENGTH.size))
        env = json.loads(_read_exact(pipe, size))
        if env != dict(os.environ):
            # Variables the loader reads at exec (LD_PRELOAD) must be there from the start: exec again
            # under the engine core's environment (the passed descriptors stay open across exec).
            os.execve(spawn.get_executable(), _command(pipe, tracker, False, tuple(preload.split(","))), env)
    _tracker._resource_tracker._fd = tracker
    for name in filter(None, preload.split(",")):
        # one that fails is imported again, and reported, when the process object is unpickled
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    spawn.spawn_main(pipe_handle=pipe, tracker_fd=tracker)


class _Handed(_SpawnPopen):  # type: ignore[misc]
    """``spawn``'s Popen, for a process that goes to a waiting interpreter."""

    _fds: list[int]

    def __init__(self, process_obj: Any, waiting: Waiting) -> None:
        self._waiting = waiting
        super().__init__(process_obj)

    def _launch(self, process_obj: Any) -> None:
        waiting = self._waiting
        prep_data = spawn.get_preparation_data(process_obj._name)
        data = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            context.reduction.dump(prep_data, data)
            context.reduction.dump(process_obj, data)
        finally:
            context.set_spawning_popen(None)
        if self._fds:  # descriptors to pass: only a fresh spawn can
            waiting.said.append(f"spawned afresh: {len(self._fds)} descriptors to pass")
            waiting.end()
            self._fds = []
            super()._launch(process_obj)
            return
        try:  # blocks while the interpreter still imports (the pipe holds 64 KiB): it reads when done
            _write_all(waiting.parent_w, data.getbuffer())
        except OSError as error:  # it died before reading (a crash while importing): spawn afresh
            waiting.said.append(f"spawned afresh: the waiting interpreter is gone ({error})")
            waiting.end()
            super()._launch(process_obj)
            return
        waiting.ended = True
        self.pid = waiting.pid
        self.sentinel = waiting.parent_r
        self.finalizer = util.Finalize(self, util.close_fds, [waiting.parent_r, waiting.parent_w])
        waiting.said.append("the engine core went to the interpreter started early")


def _popen(process_obj: Any) -> Any:
    global _slot, _seen
    with _lock:
        waiting, _slot = _slot, None
        if _is_engine_core(process_obj):
            _seen = dict(os.environ)
    if waiting is None:
        return _ORIGINAL_POPEN(process_obj)
    why = waiting.mismatch(process_obj)
    if why is not None:
        waiting.said.append(f"spawned afresh: {why}")
        waiting.end()
        return _ORIGINAL_POPEN(process_obj)
    return _Handed(process_obj, waiting)


def offer(waiting: Waiting | None) -> None:
    """Let the next ``spawn`` of vLLM's engine core take ``waiting`` (None: take nothing)."""
    global _slot
    with _lock:
        if context.SpawnProcess._Popen is not _popen:
            context.SpawnProcess._Popen = staticmethod(_popen)
        _slot = waiting


def withdraw() -> dict[str, str] | None:
    """The start is over: nothing may be taken any more. Returns the environment vLLM's engine
    core was spawned with during it (None: no engine core was spawned)."""
    global _seen
    offer(None)
    with _lock:
        seen, _seen = _seen, None
    return seen
