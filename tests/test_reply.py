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


def test_a_streaming_reply_of_a_thousand_calls_is_read_once_past_its_first_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hardening round 3: the reply was read again on every piece (1,000 calls: minutes of CPU);
    past the first call nothing is read until the step's end, and the answer before it still shows."""
    from backend.gemma4 import reply as reply_module
    from backend.gemma4.call_format import format_call

    text = "Let me check. " + "".join(format_call("calc", {"x": n}) for n in range(1000))
    reads: list[str] = []
    real = reply_module.read_reply
    monkeypatch.setattr(reply_module, "read_reply", lambda t, p: reads.append(t) or real(t, p))
    stream = reply_module.ReplyStream()
    shown = "".join(stream.feed(text[i : i + 4], 1).answer for i in range(0, len(text), 4))
    assert shown.strip() == "Let me check."
    assert len(reads) <= 10, "the pieces before the first call (and its marker), not 16,000"


def test_without_thinking_mode_a_channel_marker_that_opens_no_thought_stays_text() -> None:
    """Hardening round 3: the rest of the answer became a thought ("…opens withthought: and the rest")."""
    from backend.gemma4.reply import Prompted, read_reply

    said = read_reply("It opens with<|channel> and the rest stays.", Prompted())
    assert (said.answer, said.thought) == ("It opens with<|channel> and the rest stays.", "")
    empty = read_reply("<|channel>thought\n<channel|>Hello.", Prompted())
    assert (empty.answer, empty.thought) == ("Hello.", ""), "an empty thought block is still dropped"
    stray = read_reply("<|channel>thought\nhmm<channel|>Hello.", Prompted())
    assert (stray.answer, stray.thought) == ("Hello.", "hmm"), "a labelled block is a thought"
