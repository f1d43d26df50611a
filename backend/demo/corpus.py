"""The demo model's corpus: the running interpreter's standard library, as Gemma 4 chat turns.

Every function and method becomes one conversation: the user turn holds its decorators,
signature and docstring, the model turn the body, then ``<turn|>``. So the trained model
answers inside the turn format (``ask --demo "def fibonacci(n):"`` gets a body back) and
learns to end its turn. Files are split into training and held-out sets by file, with a
fixed seed; test folders are left out.
"""

from __future__ import annotations

import ast
import random
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__", "dist-packages"})
HELD_OUT_FRACTION = 0.04
MAX_FILE_BYTES = 400_000


@dataclass(frozen=True)
class Corpus:
    root: Path
    train_files: tuple[Path, ...]
    held_out_files: tuple[Path, ...]


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def python_files(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root`` outside test folders, in a stable order."""
    files = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(part in SKIPPED_DIRS or part.startswith("test_") for part in parts):
            continue
        if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
            files.append(path)
    return files


def split_corpus(root: Path, seed: int, limit_files: int | None = None) -> Corpus:
    """Split ``root``'s Python files into training and held-out sets (by file, fixed seed)."""
    files = python_files(root)
    random.Random(seed).shuffle(files)
    if limit_files is not None:
        files = files[:limit_files]
    held = max(1, round(len(files) * HELD_OUT_FRACTION))
    return Corpus(root=root, train_files=tuple(files[held:]), held_out_files=tuple(files[:held]))


def chat_turn(prompt: str, answer: str) -> tuple[str, str]:
    """One conversation as the chat template renders it, split where the app's prompt ends.

    The two halves are tokenized apart: the prompt the app sends ends with ``<|turn>model\n``,
    so the model must see that newline as its own token and the body's indentation after it
    (tokenized together, BPE would merge the newline into the indentation, and a lone newline
    would only ever precede ``<turn|>`` — the model would end its turn at once).
    """
    return f"<bos><|turn>user\n{prompt}<turn|>\n<|turn>model\n", f"{answer}<turn|>\n"


def function_examples(source: str) -> Iterator[tuple[str, str]]:
    """(signature and docstring, body) for each top-level function and method in ``source``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    lines = source.splitlines(keepends=True)
    for node in _functions(tree.body):
        example = _split_function(node, lines)
        if example is not None:
            yield example


def _functions(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body)


def _split_function(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> tuple[str, str] | None:
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    body = node.body
    if body[0].lineno == node.lineno or node.end_lineno is None:
        return None  # a one-line function: nothing to split
    has_docstring = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    if has_docstring and len(body) == 1:
        return None
    split_after = body[0].end_lineno if has_docstring and body[0].end_lineno else body[0].lineno - 1
    whole = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
    head_count = split_after - first + 1
    whole_lines = whole.splitlines(keepends=True)
    prompt = "".join(whole_lines[:head_count]).rstrip("\n")
    answer = "".join(whole_lines[head_count:])
    if not answer.strip():
        return None
    return prompt, answer.rstrip("\n") + "\n"


def file_turns(path: Path) -> list[tuple[str, str]]:
    """All of one file's conversations (none when it cannot be read or parsed)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return [chat_turn(prompt, answer) for prompt, answer in function_examples(source)]
