"""Hardening round 3 (issue 46, items 9 and 14): how a reply is read and how a failed one ends
``ask``. Without thinking mode a literal ``<|channel>`` that opens no thought stays text (item 9);
ordinary refusals exit 2, as for a bad flag, and 1 stays for failures and internal errors (item 14)."""

from __future__ import annotations


def test_without_thinking_mode_a_channel_marker_that_opens_no_thought_stays_text() -> None:
    """Hardening round 3: the rest of the answer became a thought ("…opens withthought: and the rest")."""
    from backend.gemma4.reply import Prompted, read_reply

    said = read_reply("It opens with<|channel> and the rest stays.", Prompted())
    assert (said.answer, said.thought) == ("It opens with<|channel> and the rest stays.", "")
    empty = read_reply("<|channel>thought\n<channel|>Hello.", Prompted())
    assert (empty.answer, empty.thought) == ("Hello.", ""), "an empty thought block is still dropped"
    stray = read_reply("<|channel>thought\nhmm<channel|>Hello.", Prompted())
    assert (stray.answer, stray.thought) == ("Hello.", "hmm"), "a labelled block is a thought"


def test_a_refused_request_exits_2_and_a_failed_one_1() -> None:
    """Hardening round 3: ordinary refusals (a video sent to a server, a server's 404) exited 1,
    the status of an internal error."""
    from app.commands.ask_output import failed_status
    from backend.engine.protocol import Failed

    assert failed_status(Failed("r", "HTTP 404 from the server", "rejected")) == 2
    assert failed_status(Failed("r", "not started", "not_running")) == 2
    assert failed_status(Failed("r", "the engine died", "engine_died")) == 1
    assert failed_status(Failed("r", "something else")) == 1
