"""Gemma 4 tool-call text → calls: recorded shapes, typed values, and malformed text."""

from __future__ import annotations

import pytest

from backend.gemma4.call_format import format_call, parse_output
from backend.gemma4.call_values import MalformedCall, parse_arguments
from backend.gemma4.reply import ReplyStream, read_reply

Q = '<|"|>'


def test_a_recorded_call_with_strings_and_numbers() -> None:
    text = f"<|tool_call>call:get_weather{{location:{Q}Tokyo, JP{Q},days:3}}<tool_call|><|tool_response>"
    parsed = parse_output(text)
    assert parsed.content == ""
    assert len(parsed.calls) == 1
    call = parsed.calls[0]
    assert (call.name, call.arguments, call.error) == (
        "get_weather",
        {"location": "Tokyo, JP", "days": 3},
        None,
    )


def test_nested_objects_arrays_numbers_booleans_and_null() -> None:
    args = parse_arguments(
        f"{{filter:{{tags:[{Q}a{Q},{Q}b{Q}],min:-2.5,exact:true,owner:null}},limit:10,flags:[true,false]}}"
    )
    assert args == {
        "filter": {"tags": ["a", "b"], "min": -2.5, "exact": True, "owner": None},
        "limit": 10,
        "flags": [True, False],
    }


def test_strings_keep_delimiters_of_the_format_and_unicode() -> None:
    tricky = 'a, b} c] "quoted" {x:1}\nnew line — 東京 🚀'
    args = parse_arguments(f"{{text:{Q}{tricky}{Q}}}")
    assert args == {"text": tricky}


def test_several_calls_and_text_before_them() -> None:
    text = (
        "Let me check both.\n"
        f"<|tool_call>call:calculator{{expression:{Q}2+2{Q}}}<tool_call|>"
        f"<|tool_call>call:current_time{{timezone:{Q}Asia/Tokyo{Q}}}<tool_call|><|tool_response>"
    )
    parsed = parse_output(text)
    assert parsed.content == "Let me check both."
    assert [c.name for c in parsed.calls] == ["calculator", "current_time"]
    assert parsed.calls[1].arguments == {"timezone": "Asia/Tokyo"}


def test_an_unterminated_call_is_reported_not_raised() -> None:
    parsed = parse_output(f"<|tool_call>call:read_file{{path:{Q}/tmp/x")
    assert len(parsed.calls) == 1
    assert parsed.calls[0].name == "read_file"
    assert parsed.calls[0].error is not None and "cut off" in parsed.calls[0].error


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("{city:New York}", "'New York' is not a value"),  # the model's own mistake: it must read why
        ("{n:1 2,m:3}", "'1 2' is not a value"),
        ("{n:1,m}", "a key has no value"),
        ('{city:<|"|>New Yo', "cut off"),  # the text ends inside the arguments: the call is not whole
        ("{n:1,m", "cut off"),
        ("{n:[1,2", "cut off"),
        ("{n:{a:1}", "cut off"),
    ],
)
def test_a_call_the_stop_token_closed_says_what_is_wrong_with_it(body: str, error: str) -> None:
    """The model ended the reply itself inside a call: a call it wrote whole but wrong gets the
    reason (not "cut off", which would make the model repeat it); one the text ends inside is cut off."""
    (call,) = parse_output(f"<|tool_call>call:weather{body}", complete=True).calls
    assert call.error is not None and error in call.error, call.error


@pytest.mark.parametrize(
    "body",
    [
        f"call:calc{{expression:{Q}2+2}}",  # string not closed
        "call:calc{a:1,b:}",  # empty value
        "call:calc{a:1 b:2}",  # missing comma
        "call:calc[1,2]",  # not an object
        "nonsense",  # no header
    ],
)
def test_malformed_call_text_becomes_an_error_call(body: str) -> None:
    parsed = parse_output(f"<|tool_call>{body}<tool_call|>")
    assert parsed.calls[0].error, body


def test_format_and_parse_round_trip() -> None:
    arguments = {"q": "x,y}", "n": 3, "f": 0.5, "ok": False, "items": [{"a": [1, "two"]}], "none": None}
    parsed = parse_output(format_call("search", arguments))
    assert parsed.calls[0].arguments == arguments


def test_a_streaming_call_is_hidden_from_the_answer() -> None:
    assert read_reply("Sure.<|tool_call>call:calc{expr").answer == "Sure."
    assert read_reply("Plain answer.<turn|>").answer == "Plain answer."


def test_parse_arguments_rejects_trailing_text() -> None:
    with pytest.raises(MalformedCall):
        parse_arguments("{a:1} extra")


def test_agrees_with_vllms_gemma4_argument_parser() -> None:
    """vLLM's own parser returns bare values as text; on strings and structure we must agree."""
    from vllm.parser.gemma4 import _parse_gemma4_args

    body = f"location:{Q}Paris, {{FR}}{Q},tags:[{Q}x{Q},{Q}y{Q}],nested:{{k:{Q}v{Q}}}"
    theirs = _parse_gemma4_args(body)
    ours = parse_arguments("{" + body + "}")
    assert ours == theirs


def test_the_reply_stream_never_shows_call_markup() -> None:
    stream = ReplyStream()
    pieces = [
        "Let",
        " me",
        " check.",
        "<|tool_call>",
        "call:calc{",
        "x:1}",
        "<tool_call|>",
        "<|tool_response>",
    ]
    shown = "".join(stream.feed(p).answer for p in pieces)
    stream.next_step()
    shown += "".join(stream.feed(p).answer for p in ["It", " is", " 1.", "<turn|>"])
    assert shown == "Let me check.\n\nIt is 1."
