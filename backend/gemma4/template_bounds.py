"""A model folder's chat template is input: its render is bounded in time and output size, and
whatever goes wrong in it is a message naming the folder, never a hang or an internal error.

transformers compiles a template once (``_compile_jinja_template``, cached by its text) in Jinja's
sandbox, where every call in the template goes through ``environment.call`` and ``range`` is a
global. ``install`` wraps those on that compiled template — each call and every 1,024 steps of a
``range`` check the render's deadline — and renders it piece by piece (``Template.generate``), so
output past the bound stops the render before it is joined, let alone tokenized. The bounds hold
only inside ``bounded()``; outside it the template renders as transformers would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from backend.errors import GemmaChatError

RENDER_SECONDS = 5.0
"""A published Gemma 4 template renders a long chat with tools in milliseconds."""
MAX_PROMPT_CHARS = 2_000_000
"""About 16 characters per token of E2B's 128K context window: no prompt that fits is longer."""
_CHECK_EVERY = 1024


class TemplateFailed(GemmaChatError):
    """A model folder's chat template that is missing, empty, broken, unbounded or raises."""


@dataclass
class _Budget:
    deadline: float
    max_chars: int


_local = threading.local()


def _budget() -> _Budget | None:
    return getattr(_local, "budget", None)


class BoundExceeded(Exception):
    """Raised inside a render that ran past its bound (turned into ``TemplateFailed`` by ``render``)."""


def _check() -> None:
    budget = _budget()
    if budget is not None and time.monotonic() > budget.deadline:
        raise BoundExceeded(f"it ran for more than {RENDER_SECONDS:.0f} s")


@contextmanager
def bounded(seconds: float = RENDER_SECONDS, max_chars: int = MAX_PROMPT_CHARS) -> Iterator[None]:
    """Renders on this thread inside the block are bounded."""
    previous = _budget()
    _local.budget = _Budget(time.monotonic() + seconds, max_chars)
    try:
        yield
    finally:
        _local.budget = previous


def install(template_text: str) -> None:
    """Bound transformers' compiled form of ``template_text`` (once per compiled template)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    compiled = _compile_jinja_template(template_text)
    environment = compiled.environment
    if getattr(compiled, "_gemma_chat_bounded", False):
        return
    if not getattr(environment, "_gemma_chat_bounded", False):
        call = environment.call
        safe_range = environment.globals["range"]

        def bounded_call(context: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
            _check()
            return call(context, function, *args, **kwargs)

        def bounded_range(*args: int) -> Iterator[int]:
            for count, value in enumerate(safe_range(*args)):
                if count % _CHECK_EVERY == 0:
                    _check()
                yield value

        environment.call = bounded_call
        environment.globals["range"] = bounded_range
        environment._gemma_chat_bounded = True
    generate: Callable[..., Iterator[str]] = compiled.generate

    def render_bounded(*args: Any, **kwargs: Any) -> str:
        budget = _budget()
        pieces: list[str] = []
        size = 0
        for piece in generate(*args, **kwargs):
            size += len(piece)
            if budget is not None and size > budget.max_chars:
                raise BoundExceeded(f"its output passed {budget.max_chars:,} characters")
            pieces.append(piece)
        return "".join(pieces)

    compiled.render = render_bounded
    compiled._gemma_chat_bounded = True


def _prepare(where: str, text: str | None) -> None:
    """Refuse a missing, empty or broken template; bound a good one."""
    if text is None:
        raise TemplateFailed(
            f"{where} is missing: the folder has no chat_template.jinja and its tokenizer_config.json "
            "names no chat_template.",
            "Copy the model's chat_template.jinja into the folder.",
        )
    if not text.strip():
        raise TemplateFailed(f"{where} is empty: every prompt would be empty.", "Restore the template.")
    from jinja2 import TemplateError

    try:
        install(text)
    except TemplateError as error:
        raise TemplateFailed(f"{where} does not compile: {error}", "Fix or replace the template.") from None


def render(folder: str, template: str | dict[str, str] | None, apply: Callable[[], str]) -> str:
    """``apply()`` — transformers' render of ``template`` (or of one of its named templates) —
    bounded in time and output, its failures named with the folder."""
    where = f"The chat template of {folder}"
    for text in template.values() if isinstance(template, dict) else [template]:
        _prepare(where, text)
    from jinja2 import TemplateError

    try:
        with bounded():
            return apply()
    except BoundExceeded as bound:
        raise TemplateFailed(
            f"{where} was stopped: {bound}.", "A chat template renders in milliseconds; replace this one."
        ) from None
    except TemplateError as error:  # raise_exception(...) lands here with the template's own words
        raise TemplateFailed(f"{where} refused the messages: {error}") from None
    except (RecursionError, MemoryError) as error:
        raise TemplateFailed(
            f"{where} was stopped: {type(error).__name__} while rendering.", "Replace chat_template.jinja."
        ) from None
    except Exception as error:  # the template's own code failed (the sandbox's range bound, a type)
        raise TemplateFailed(
            f"{where} failed while rendering: {type(error).__name__}: {error}", "Replace chat_template.jinja."
        ) from None
