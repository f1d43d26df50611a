"""Reading a Gemma 4 reply: thought apart from the answer, whole and while it streams."""

from __future__ import annotations

import pytest

from backend.gemma4.reply import Prompted, ReplyStream, read_reply

Q = '<|"|>'
THINKING = Prompted(thinking=True)
OPENED = Prompted(thought_open=True, thinking=True)


@pytest.mark.parametrize(
    ("text", "prompted", "answer", "thought"),
    [
        ("<|channel>thought\nLet me think.<channel|>Final answer", THINKING, "Final answer", "Let me think."),
        ("thought\nThe answer is 4.", Prompted(), "The answer is 4.", ""),
        ("still thinking<channel|>The answer", OPENED, "The answer", "still thinking"),
        ("pondering<channel|>Answer", THINKING, "Answer", "pondering"),
        ("thought\npondering<channel|>Answer", Prompted(), "Answer", "pondering"),
        ("A plain answer.<channel|>", Prompted(), "A plain answer.", ""),  # a stray marker hides nothing
        ("<|channel>thought\n<channel|>Empty thought.", THINKING, "Empty thought.", ""),
        ("thoughtful people agree.", Prompted(), "thoughtful people agree.", ""),
    ],
)
def test_thought_and_answer_apart(text: str, prompted: Prompted, answer: str, thought: str) -> None:
    reply = read_reply(text, prompted)
    assert (reply.answer, reply.thought) == (answer, thought)


def test_a_thought_that_runs_into_a_call_ends_there() -> None:
    reply = read_reply(f"<|channel>thought\nNeed it.<|tool_call>call:calc{{x:{Q}1{Q}}}<tool_call|>", THINKING)
    assert (reply.thought, reply.answer, [c.name for c in reply.calls]) == ("Need it.", "", ["calc"])


def test_what_a_prompt_says() -> None:
    assert Prompted.by("<|turn>system\n<|think|>\n<turn|>\n<|turn>model\n") == THINKING
    assert Prompted.by("…<tool_response|><|channel>thought\n") == Prompted(thought_open=True)
    assert Prompted.by("<|turn>model\n<|channel>thought\n<channel|>") == Prompted()  # 31B, thinking off


def test_the_stream_shows_thought_and_answer_and_never_a_marker() -> None:
    stream = ReplyStream(THINKING)
    chunks = [
        "<|chan",
        "nel>thou",
        "ght",
        "\nI think",
        " more",
        "<chan",
        "nel|>The",
        " answer.",
        "<tu",
        "rn|>",
    ]
    pieces = [stream.feed(c, 1) for c in chunks]
    assert "".join(p.thought for p in pieces) == "I think more"
    assert "".join(p.answer for p in pieces) == "The answer."
    assert all("<" not in p.answer + p.thought and "|" not in p.answer for p in pieces)
    assert stream.thought_tokens == 6


def test_the_stream_holds_a_possible_label_and_flushes_at_the_end() -> None:
    stream = ReplyStream()
    assert stream.feed("thou").answer == "" and stream.feed("ght\n").answer == ""
    assert stream.feed("Hi").answer == "Hi"
    stream = ReplyStream()
    assert stream.feed("Answer <").answer == "Answer"
    assert stream.flush("Answer <", "").answer == " <", "a held tail is shown when the reply ends"


def test_steps_of_a_tool_turn_are_set_apart() -> None:
    stream = ReplyStream()
    first = stream.feed("Checking.").answer + stream.feed("<|tool_call>call:f{}<tool_call|>").answer
    stream.next_step(Prompted(thought_open=True))
    second = stream.feed("Seen it.<channel|>").thought + stream.feed("Done.").answer
    assert (first, second) == ("Checking.", "Seen it.\n\nDone.")
