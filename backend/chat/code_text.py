"""Code written outside a fence, shown as code: a message's text as Markdown in which runs of
lines that read as code are fenced, so their indentation survives.

Markdown drops a paragraph's leading whitespace: the demo model's Python bodies (and any model's
unfenced snippet) showed ``if …:`` and ``return …`` flush left, while F7's token view kept them
indented. A run of non-blank lines is code when one of its lines (not a list item or a quote) is
indented and most of its lines look like code (a keyword statement, an assignment, a call, a line
that opens or closes a block); code runs separated only by blank lines make one block. Fenced
text is left as written. The reply's first line may have lost its indentation (a reply is read
with its surrounding whitespace stripped); ``restore_first_indent`` puts it back where the lines
after it say where it stood. Used by the chat view and by the Markdown export.
"""

from __future__ import annotations

import re
import textwrap

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_LIST_OR_QUOTE = re.compile(r"^\s*([-*+>]|\d+[.)])(\s|$)")
_CODE_LINE = re.compile(
    r"""^(
        (def|class|async\s+def|return|yield|import|from\s+\S+\s+import|if|elif|else|for|while|try|
         except|finally|with|raise|assert|pass|break|continue|lambda|global|nonlocal|del|
         function|const|let|var|fn|pub|impl|struct|enum|public|private|protected|static|
         \#include|package|func)\b
        | @\w                                   # a decorator
        | [\w.\[\]'"]+\s*([-+*/%|&^]|//|<<|>>)?=(?!=)  # an assignment
        | [\w.]+\(.*\);?$                       # a call on its own
        | .*[:{(\[,;]$                          # a line that opens a block or goes on
        | [)}\]]+[;,)]*$                        # a line that closes one
        | \#.*|//.*                             # a comment
    )""",
    re.VERBOSE,
)
CODE_SHARE = 0.6
"""The share of a run's lines that must look like code."""
LONGEST_CODE_LINE = 500
"""A longer line is prose (and the patterns never meet a pasted megabyte line)."""
_PYTHON = re.compile(r"^(def |class |import |from \S+ import |elif |except\b|return\b|self\.)|:$")
"""A line only Python writes so (without a line ending in a brace or a semicolon)."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def looks_like_code(line: str) -> bool:
    stripped = line.strip()
    if not stripped or len(stripped) > LONGEST_CODE_LINE or _LIST_OR_QUOTE.match(stripped):
        return False
    return _CODE_LINE.match(stripped) is not None


def is_code(lines: list[str]) -> bool:
    """Whether a run of non-blank ``lines`` reads as code (and has indentation to lose)."""
    indented = any(_indent(line) > 0 and not _LIST_OR_QUOTE.match(line) for line in lines)
    return indented and sum(map(looks_like_code, lines)) >= CODE_SHARE * len(lines)


def restore_first_indent(lines: list[str]) -> list[str]:
    """``lines`` with the first one indented where it stood, if it was stripped: the lines after
    a flush-left first line are all indented. A first line that opens a block stands one level
    out from the line after it; any other first line stands with the line after it."""
    rest = [line for line in lines[1:] if line.strip()]
    if not lines or _indent(lines[0]) > 0 or not rest or min(map(_indent, rest)) == 0:
        return lines
    following = _indent(rest[0])
    if lines[0].rstrip().endswith((":", "{")):
        outer = [depth for depth in map(_indent, rest) if depth < following]
        level = max(outer, default=0)
    else:
        level = following
    return [" " * level + lines[0], *lines[1:]]


def _fenced(lines: list[str]) -> list[str]:
    body = textwrap.dedent("\n".join(lines)).splitlines()
    stripped = [line.strip()[:LONGEST_CODE_LINE] for line in body]
    braces = any(line.endswith(("{", "}", ";")) for line in stripped)
    python = not braces and any(_PYTHON.search(line) for line in stripped)
    language = "python" if python else ""
    ticks = "````" if any(line.lstrip().startswith("```") for line in body) else "```"
    return [f"{ticks}{language}", *body, ticks]


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines, and the blank lines between them as runs of their own."""
    runs: list[list[str]] = []
    for line in lines:
        if runs and bool(line.strip()) == bool(runs[-1][0].strip()):
            runs[-1].append(line)
        else:
            runs.append([line])
    return runs


def _unfenced(lines: list[str], at_start: bool = False) -> list[str]:
    """``lines`` (outside any fence) with their code runs fenced; ``at_start``: they begin the
    message, whose first line may have lost its indentation."""
    runs = _paragraphs(lines)
    if at_start and runs and runs[0][0].strip() and is_code(restored := restore_first_indent(runs[0])):
        runs[0] = restored
    out: list[str] = []
    index = 0
    while index < len(runs):
        run = runs[index]
        if not run[0].strip() or not is_code(run):
            out += run
            index += 1
            continue
        block = list(run)
        index += 1
        # blank lines followed by more code (a function's blank line) stay in the block
        while index + 1 < len(runs) and is_code(runs[index + 1]):
            block += runs[index] + runs[index + 1]
            index += 2
        out += _fenced(block)
    return out


def code_as_code(text: str) -> str:
    """``text`` (Markdown) with its unfenced code fenced, indentation kept; the rest as written."""
    lines = text.split("\n")
    out: list[str] = []
    outside: list[str] = []
    fence: str | None = None
    for line in lines:
        match = FENCE.match(line)
        if fence is None and match:
            out += _unfenced(outside, at_start=not out)
            outside = []
            fence = match.group(1)
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        else:
            outside.append(line)
    out += _unfenced(outside, at_start=not out)
    return "\n".join(out)
