"""Random Gemma 4 replies for the differential test against vLLM's parsers.

Every tool call is written by the published chat template itself (the 2026-07-09 E2B revision,
rendered with jinja2 as transformers renders it): an assistant message with ``tool_calls`` goes
through the template and the model turn is cut out of the prompt. A value the model might write
wrongly (``zip:02139`` for a string parameter, ``count:<|"|>2<|"|>`` for an integer one) goes
through the template too: ``Unquoted`` reaches the macro's last branch, which writes it as is.
Each case keeps what it was built from (names, arguments, schemas, thought, answer).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.support.published_templates import CURRENT, published

OPEN, CLOSE, Q = "<|tool_call>", "<tool_call|>", '<|"|>'
PIECES = [*"aZ09 ,{}[]():'\"\\\n\t-.#=+<>é—…", "東京", "🚀", "call:", "null", "true", "x:1"]
"""What random strings are made of (no `|`, so no marker can form by chance)."""
WORDS = [
    "Let",
    "me",
    "check",
    "that",
    "for",
    "you.",
    "The",
    "answer",
    "is",
    "42",
    "—",
    "東京",
    "🚀",
    "(ok)",
    "a,b",
]


class Unquoted:
    """A value the template writes without ``<|"|>``: ``format_argument`` ends in ``{{ argument }}``."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __str__(self) -> str:
        return self.token


class Slip(str):
    """A value the model put between ``<|"|>`` for a non-string parameter (``typed``: its meaning)."""

    typed: Any


def slip(typed: Any) -> Slip:
    written = Slip(str(typed).lower())
    written.typed = typed
    return written


def template() -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(published(CURRENT))


def render_calls(tpl: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each call as the template writes it in a model turn (``<|tool_call>call:NAME{…}<tool_call|>``)."""
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for i, (name, arguments) in enumerate(calls)
    ]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
    ]
    turn = tpl.render(messages=messages, bos_token="<bos>").split("<|turn>model\n", 1)[1]
    turn = turn.removesuffix("<|tool_response>")
    return [OPEN + part for part in turn.split(OPEN)[1:]]


def text(rng: random.Random, pieces: list[str], most: int) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, most)))


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) + rng.choice(
        ["", "\n", "\nand more."]
    )


def key(rng: random.Random) -> str:
    return rng.choice("abcxyzABQ_") + text(rng, list("abcdefghijklmnopqrstuvwxyz0123456789_"), 7)


def scalar(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return text(rng, PIECES, 8)
    if kind == 1:
        return rng.choice([0, -1, 7, 2**40, -(10**18), rng.randint(-1000, 1000)])
    if kind == 2:
        return rng.choice([0.5, -2.25, 1e-05, 2.5e20, round(rng.uniform(-1e4, 1e4), rng.randint(0, 6))])
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return None
    return rng.choice(LOOKALIKES)  # strings that look like values


def value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return {key(rng): value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if depth < 3 and roll < 0.3:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return scalar(rng)


def arguments(rng: random.Random) -> dict[str, Any]:
    return {key(rng): value(rng) for _ in range(rng.randint(0, 5))}


LOOKALIKES = ["02139", "2", "-3.5", "true", "null", "1e3", ""]
SCALARS = {
    "string": lambda rng: rng.choice(LOOKALIKES) if rng.random() < 0.2 else text(rng, PIECES, 8),
    "integer": lambda rng: rng.randint(-(10**6), 10**6),
    "number": lambda rng: rng.choice([rng.randint(-99, 99), round(rng.uniform(-1e3, 1e3), 3)]),
    "boolean": lambda rng: rng.random() < 0.5,
}


def schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    roll = rng.random()
    if depth < 2 and roll < 0.12:
        props = {key(rng): schema(rng, depth + 1) for _ in range(rng.randint(1, 3))}
        nested = {"type": "object", "properties": props}
        return {"anyOf": [nested, {"type": "null"}]} if rng.random() < 0.3 else nested
    if depth < 2 and roll < 0.2:
        return {"type": "array", "items": schema(rng, depth + 1)}
    kind = rng.choice(list(SCALARS))
    if roll < 0.3:
        return {"type": [kind, "null"]}
    if roll < 0.38:
        return {"anyOf": [{"type": kind}, {"type": "null"}]}
    if roll < 0.46:
        return {"enum": [SCALARS[kind](rng), SCALARS[rng.choice(list(SCALARS))](rng), None]}
    if roll < 0.52:
        return {"type": rng.choice([["string", "integer"], ["number", "string"], ["boolean", "string"]])}
    return {"type": kind}


def conforming(rng: random.Random, spec: dict[str, Any], slips: bool = True) -> Any:
    """A value ``spec`` allows; now and then written the way a model gets it wrong."""
    if "enum" in spec:
        return rng.choice(spec["enum"])
    if "anyOf" in spec:
        return conforming(rng, rng.choice(spec["anyOf"]))
    kind = spec["type"]
    if isinstance(kind, list):
        return conforming(rng, {**spec, "type": rng.choice(kind)}, slips and "string" not in kind)
    if kind == "null":
        return None
    if kind == "object":
        return {k: conforming(rng, s) for k, s in spec["properties"].items() if rng.random() < 0.85}
    if kind == "array":
        return [conforming(rng, spec["items"]) for _ in range(rng.randint(0, 3))]
    written = SCALARS[kind](rng)
    if slips and rng.random() < 0.15:  # the model's mistakes: a quoted number, a bare numeric string
        word = rng.choice([str(rng.randint(0, 99999)).zfill(5), "celsius", "N/A", "v1.2"])
        return slip(written) if kind != "string" else Unquoted(word)
    return written


@dataclass
class Case:
    text: str
    """The reply as vLLM's detokenizer hands it over (special tokens kept, the stop token removed)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    raws: list[str] = field(default_factory=list)
    thought: str = ""
    answer: str = ""
    before: str = ""
    """The answer text before the first call."""
    refused: set[int] = field(default_factory=set)
    """The calls that hold a phrase written without delimiters."""
    shape: set[str] = field(default_factory=set)
    """What kind of reply: thought, label, thought_cut, prompt_opened,
    lone_close, colon, paren, spaced, stop_closed, cut, after, dotted, syntax."""


def name(rng: random.Random, case: Case) -> str:
    if rng.random() < 0.05:
        case.shape.add("dotted")
        return rng.choice(["github.search", "read-file", "fs.read_file"])
    return rng.choice("gsrf") + text(rng, list("abcdefghij_0123456789"), 10)


def reply(rng: random.Random, tpl: Any) -> Case:
    case = Case("")
    for _ in range(rng.choice([0, 0, 1, 1, 1, 2, 3])):
        called = name(rng, case)
        spec = case.schemas.setdefault(
            called, {"type": "object", "properties": {key(rng): schema(rng) for _ in range(4)}}
        )
        args = {k: conforming(rng, s) for k, s in spec["properties"].items() if rng.random() < 0.8}
        extra = key(rng)
        if rng.random() < 0.2 and extra not in spec["properties"]:
            args[extra] = value(rng)  # a parameter the schema does not name
        strings = [k for k, s in spec["properties"].items() if s.get("type") == "string"]
        if strings and rng.random() < 0.05:  # a phrase without delimiters: ours refuses it
            args[rng.choice(strings)] = Unquoted(rng.choice(["New York", "two words", "a b"]))
            case.refused.add(len(case.calls))
        case.calls.append((called, args))
    case.raws = render_calls(tpl, case.calls)
    for i, raw in enumerate(case.raws):
        roll = rng.random()
        if roll < 0.1:
            case.shape.add("colon")
            case.raws[i] = raw.replace(f"{OPEN}call:", f"{OPEN}:", 1)
        elif roll < 0.2:
            case.shape.add("paren")
            head, _, body = raw.partition("{")
            case.raws[i] = f"{head}({body.removesuffix('}' + CLOSE)}){CLOSE}"
        elif roll < 0.3:  # spaces after the separators, outside strings
            case.shape.add("spaced")
            head, brace, body = raw.partition("{")
            parts = body.split(Q)
            parts[::2] = [p.replace(",", ", ").replace(":", ": ") for p in parts[::2]]
            case.raws[i] = head + brace + Q.join(parts)
    answer = sentence(rng) if not case.calls or rng.random() < 0.5 else ""
    if not case.calls and rng.random() < 0.08:
        case.shape.add("syntax")
        answer = f"To run it, write call:{name(rng, case)}{{a:1}} on its own line."
    case.before = case.answer = answer.strip()
    body = answer + "".join(case.raws)
    ending = rng.random() if case.calls else 1.0
    if ending < 0.25:
        case.shape.add("stop_closed")
        body = body.removesuffix(CLOSE)
    elif ending < 0.35:  # the length limit cut the last call
        case.shape.add("cut")
        last = case.raws[-1]
        opener = min(i for i in (last.find("{"), last.find("(")) if i != -1)
        body = body.removesuffix(last) + last[: rng.randint(opener + 1, len(last) - len(CLOSE) - 1)]
    elif ending < 0.5:
        case.shape.add("after")
        after = " " + sentence(rng)
        body, case.answer = body + after, (answer + after).strip()
    if case.calls and ending >= 0.35 and rng.random() < 0.5:
        body += "<|tool_response>"
    roll = rng.random()
    case.thought = sentence(rng).strip() if roll < 0.55 and rng.random() < 0.9 else ""
    if roll < 0.3:
        case.shape.add("thought")
        case.text = f"<|channel>thought\n{case.thought}<channel|>{body}"
    elif roll < 0.4 and case.calls and not answer and case.thought:
        case.shape.add("thought_cut")
        case.text = f"<|channel>thought\n{case.thought}{body}"
    elif roll < 0.45 and case.calls and not answer and case.thought:
        case.shape.add("prompt_opened")  # the prompt ended in <|channel>thought\n; a call ends the thought
        case.text = f"{case.thought}{body}"
    elif roll < 0.55 and case.thought:
        case.shape.add("lone_close")
        case.text = f"{case.thought}<channel|>{body}"
    elif roll < 0.65 and answer:
        case.thought = ""
        case.shape.add("label")
        case.text = f"thought\n{body}"
    else:
        case.thought = ""
        case.text = body
    return case
