"""Gemma 4 replies read by gemma-chat and by vLLM 0.32's own parsers, and what tells them apart.

``kinds_of`` checks ours against what a case (tests/support/gemma4_cases.py) was built from, then names
each way vLLM's ``parse_tool_calls`` / ``parse_thinking_output`` (its offline utilities) and its
``Gemma4Parser`` (the engine parser behind ``--tool-call-parser gemma4``, typed by the request's
tool schemas) read it differently. A disagreement no check explains comes back as
``unexplained: …``. tests/gemma4/test_gemma4_differential.py lists the known kinds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from backend.gemma4.call_values import Bare, by_look
from backend.gemma4.reply import Prompted, read_reply
from backend.gemma4.schema_values import _items, _property, to_schema, types_of
from tests.support.gemma4_cases import Case, Slip, Unquoted

DEMO = Path(__file__).resolve().parents[2] / "assets/demo/model"
"""The demo model's tokenizer carries every Gemma 4 special token (the engine parser needs one)."""


def vllm_parsers() -> dict[str, Any]:
    from vllm import tokenizers
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.gemma4 import Gemma4Parser
    from vllm.reasoning.gemma4_utils import parse_thinking_output
    from vllm.tool_parsers.gemma4_utils import parse_tool_calls
    from vllm.tool_parsers.utils import coerce_to_schema_type, extract_types_from_schema

    tokenizer = tokenizers.get_tokenizer(str(DEMO))
    return {
        "engine": Gemma4Parser(tokenizer),
        "fresh": lambda: Gemma4Parser(tokenizer),
        "opened": tokenizer.encode("<|turn>model\n<|channel>thought\n", add_special_tokens=False),
        "request": ChatCompletionRequest,
        "calls": parse_tool_calls,
        "thinking": parse_thinking_output,
        "coerce": lambda text, spec: coerce_to_schema_type(text, extract_types_from_schema(spec)),
    }


def same(a: Any, b: Any, numbers: bool = False) -> bool:
    """Strict equality (True is not 1); ``numbers``: an int and a float of one value are the same."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], numbers) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, numbers) for x, y in zip(a, b, strict=True))
    number = (int, float)
    if numbers and type(a) in number and type(b) in number:
        return bool(a == b)
    return type(a) is type(b) and a == b


def as_text(value: Any) -> Any:
    """A written value as vLLM's ``_parse_gemma4_args`` returns it: every scalar as text."""
    if isinstance(value, dict):
        return {k: as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_text(v) for v in value]
    return str(value)


def truth(value: Any, typed: bool = False) -> Any:
    """What a case's argument reads as: by its look, or ``typed`` by its schema."""
    if isinstance(value, Unquoted):
        return value.token if typed else by_look(Bare(value.token))
    if isinstance(value, Slip):
        return value.typed if typed else str(value)
    if isinstance(value, dict):
        return {k: truth(v, typed) for k, v in value.items()}
    return [truth(v, typed) for v in value] if isinstance(value, list) else value


def without_calls(answer: str) -> str:
    answer = re.sub(r"<\|tool_call>.*?(?:<tool_call\|>|<turn\|>|$)", "", answer, flags=re.DOTALL)
    return answer.replace("<|tool_response>", "").strip()


def standard(raw: str) -> bool:
    return re.match(r"<\|tool_call>call:\w+\{", raw) is not None


def untyped_kinds(case: Case, calls: list[Any], found: list[dict[str, Any]]) -> set[str]:
    """Ours against ``parse_tool_calls`` (arguments as text)."""
    kinds: set[str] = set()
    whole = calls[:-1] if "cut" in case.shape else calls
    readable = [c for c, raw in zip(whole, case.raws, strict=False) if standard(raw)]
    if [c.name for c in readable] != [f["name"] for f in found]:
        bare = re.search(r"(?:<call>|(?:^|\s)call:)(\w+)\{", case.text) is not None
        return {"utils_bare_call" if bare and not readable else "unexplained: call names"}
    if len(readable) != len(whole):
        kinds.add("utils_standard_only")
    for call, theirs in zip(readable, found, strict=True):
        if call.error is not None:
            kinds.add(refused(call))
            continue
        if not same({k: str(as_text(v)) for k, v in call.written.items()}, theirs["arguments"]):
            kinds.add("unexplained: arguments as written")
        for k, written in call.written.items():
            if same(call.arguments[k], theirs["arguments"][k]):
                continue
            if isinstance(written, dict | list):
                kinds.add("nested_as_repr")
            elif isinstance(written, Bare):
                kinds.add("bare_by_look")
            else:
                kinds.add(f"unexplained: {k}")
    return kinds


def refused(call: Any) -> str:
    return (
        "ours_refuses_bare_phrase" if "is not a value" in (call.error or "") else f"unexplained: {call.error}"
    )


def leaf_kinds(
    ours: Any, theirs: Any, written: Any, spec: Any, direct: Any, root: dict[str, Any], coerce: Any
) -> set[str]:
    """Ours typed by schema against vLLM's typed parser, value by value (``direct``: the schema vLLM sees)."""
    if (
        isinstance(written, dict)
        and isinstance(ours, dict)
        and isinstance(theirs, dict)
        and ours.keys() == theirs.keys()
    ):
        props = direct.get("properties") if isinstance(direct, dict) else None
        inner = [
            (k, _property(spec, k, root) if isinstance(spec, dict) else None, (props or {}).get(k))
            for k in written
        ]
        return set().union(
            *[leaf_kinds(ours[k], theirs[k], written[k], s, d, root, coerce) for k, s, d in inner]
        )
    if (
        isinstance(written, list)
        and isinstance(ours, list)
        and isinstance(theirs, list)
        and len(ours) == len(theirs)
    ):
        items = _items(spec, root) if isinstance(spec, dict) else None
        inner_direct = direct.get("items") if isinstance(direct, dict) else None
        return set().union(
            *[
                leaf_kinds(o, t, w, items, inner_direct, root, coerce)
                for o, t, w in zip(ours, theirs, written, strict=True)
            ]
        )
    if same(ours, theirs, numbers=True):
        return set()
    if not isinstance(direct, dict) and same(theirs, as_text(written)):
        return {
            "vllm_direct_schema_only"
            if isinstance(spec, dict) and types_of(spec, root)
            else "no_schema_by_look"
        }
    if isinstance(written, Bare) and theirs == f"{written})":
        return {"engine_paren_count"}
    quoted = isinstance(written, str) and not isinstance(written, Bare)
    if (
        quoted
        and ours == written
        and "string" in types_of(spec or {}, root)
        and same(theirs, coerce(written, direct))
    ):
        return {"quoted_stays_string"}
    return {f"unexplained: typed {written!r}: ours {ours!r}, vLLM {theirs!r}"}


def engine_read(case: Case, v: dict[str, Any]) -> tuple[str, str, list[tuple[str, str]]]:
    """vLLM's engine parser on the whole reply: reasoning, content, calls (name, JSON arguments).
    A reply whose prompt opened the thought goes through its streaming entry, which takes the prompt."""
    tools = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in case.schemas.items()]
    request = v["request"](model="m", messages=[{"role": "user", "content": "hi"}], tools=tools or None)
    if "prompt_opened" not in case.shape:
        reasoning, content, found = v["engine"].parse(case.text, request)
        return (
            (reasoning or "").strip(),
            (content or "").strip(),
            [(f.name, f.arguments) for f in found or []],
        )
    delta = v["fresh"]().parse_delta(case.text, [], request, v["opened"], finished=True)
    calls: dict[int, list[str]] = {}
    for piece in delta.tool_calls if delta else []:
        entry = calls.setdefault(piece.index, ["", ""])
        entry[0] += piece.function.name or ""
        entry[1] += piece.function.arguments or ""
    return (delta.reasoning or "").strip(), (delta.content or "").strip(), [(n, a) for n, a in calls.values()]


def kinds_of(case: Case, v: dict[str, Any]) -> set[str]:
    opened = Prompted(thought_open="prompt_opened" in case.shape, thinking=True)
    reply_ = read_reply(case.text, opened, complete="cut" not in case.shape)
    kinds: set[str] = set()
    # ours against what the case was built from (a call the length limit cut, or one with a phrase
    # written without delimiters, is not run: the model is told what went wrong)
    assert [c.name for c in reply_.calls] == [n for n, _ in case.calls], case.text
    last = len(case.calls) - 1 if "cut" in case.shape else -1
    errors = [i for i, c in enumerate(reply_.calls) if c.error is not None]
    assert errors == sorted(case.refused - {last} | ({last} - {-1})), case.text
    for call, (name, args) in zip(reply_.calls, case.calls, strict=True):
        if call.error is not None:
            continue
        assert same(call.arguments, truth(args)), case.text
        assert same(to_schema(call.written, case.schemas[name]), truth(args, typed=True), numbers=True), (
            case.text
        )
    assert (reply_.answer, reply_.thought) == (case.answer, case.thought), case.text
    # vLLM's offline utilities (they see the stop token, as a decoded output with it would hold)
    utils_text = case.text + ("<turn|>" if "stop_closed" in case.shape else "")
    kinds |= untyped_kinds(case, list(reply_.calls), v["calls"](utils_text))
    thinking = v["thinking"](utils_text)
    if (thinking["thinking"] or "") != reply_.thought:
        if {"thought_cut", "prompt_opened"} & case.shape:
            kinds.add("utils_thought_needs_close")
        elif "thought" in case.shape and (thinking["thinking"], reply_.thought) == ("thought", ""):
            kinds.add("utils_empty_thought_label")
        else:
            kinds.add("unexplained: utils thought")
    elif without_calls(thinking["answer"]) != reply_.answer:  # its answer keeps the calls' text
        kinds.add("unexplained: utils answer")
    # vLLM's engine parser, typed by the tools' schemas
    reasoning, content, found = engine_read(case, v)
    expected, applied = (reply_.thought, reply_.answer), set()
    if "after" in case.shape and (reasoning, content) != expected:
        expected, applied = (expected[0], case.before), {"engine_drops_text_after_calls"}
    if "label" in case.shape and (reasoning, content) != expected:
        expected, applied = (expected[1], ""), applied | {"engine_label_as_thought"}
    kinds |= (
        applied
        if (reasoning, content) == expected
        else {f"unexplained: engine text {reasoning!r} {content!r}"}
    )
    calls = list(reply_.calls)
    if "cut" in case.shape and [n for n, _ in found] == [c.name for c in calls]:
        kinds.add("engine_runs_cut_calls")
        calls, found = calls[:-1], found[:-1]
    if [c.name for c in calls] != [n for n, _ in found]:
        return kinds | {"unexplained: engine call names"}
    for call, (_, theirs) in zip(calls, found, strict=True):
        if call.error is not None:
            kinds.add(refused(call))
            continue
        spec = case.schemas[call.name]
        ours = to_schema(call.written, spec)
        kinds |= leaf_kinds(ours, json.loads(theirs), call.written, spec, spec, spec, v["coerce"])
    return kinds
