"""The compare verdict: a chat's compares' median and range, "within noise", the labelled single run."""

from __future__ import annotations

from backend.chat.compare import SAME_PATHS, CompareResult, PathDifference
from backend.chat.verdict import (
    COMPARE_KEY,
    SPEEDUP_KEY,
    Verdict,
    compares_so_far,
    first_path,
)
from backend.engine.metrics import TurnMetrics
from backend.engine.parity import TokenParity
from backend.engine.protocol import Finished

SPECULATION = (PathDifference("speculative_config", None, {"method": "mtp", "num_speculative_tokens": 2}),)


def _result(
    base_tok_s: float, opt_tok_s: float, differences: tuple[PathDifference, ...] = SPECULATION
) -> CompareResult:
    def finished(speed: float) -> Finished:
        metrics = TurnMetrics(generated_tokens=100, decode_tokens_per_s=speed, e2e_s=100 / speed)
        return Finished("r", "text", (1, 2, 3), metrics, "stop")

    return CompareResult(finished(base_tok_s), finished(opt_tok_s), TokenParity(3, 3, None), differences)


def test_one_compare_shows_its_figure_labelled_as_one_run() -> None:
    line = Verdict(_result(100.0, 193.0), (), "baseline").summary()
    assert line.startswith("speed-up: decode 1.93x, end-to-end 1.93x (one run, baseline first: noisy)")
    assert "median" not in line and line.endswith("parity: identical (3 tokens)")


def test_compares_whose_range_reaches_one_are_within_noise() -> None:
    verdict = Verdict(_result(100.0, 116.0), (1.93, 0.94), "baseline")
    assert verdict.speedups.values == (1.93, 0.94, 1.16)
    assert verdict.within_noise is True
    line = verdict.summary()
    assert line.startswith("speed-up: decode median 1.16x of 3 compares (range 0.94-1.93x): within noise")
    assert "this run: decode 1.16x, end-to-end 1.16x, baseline first" in line


def test_compares_that_agree_name_the_faster_path() -> None:
    faster = Verdict(_result(100.0, 150.0), (1.4,), "optimized")
    assert faster.within_noise is False
    assert "median 1.45x of 2 compares (range 1.40-1.50x): optimized faster" in faster.summary()
    assert "optimized first" in faster.summary()
    slower = Verdict(_result(100.0, 80.0), (0.9, 0.85), "baseline")
    assert "median 0.85x of 3 compares (range 0.80-0.90x): optimized slower" in slower.summary()


def test_a_range_touching_one_exactly_is_within_noise() -> None:
    assert Verdict(_result(100.0, 100.0), (1.3,)).within_noise is True


def test_same_paths_keep_their_sentence_and_add_no_ratio() -> None:
    verdict = Verdict(_result(100.0, 180.0, ()), (1.2, 1.3))
    assert verdict.summary().startswith(SAME_PATHS)
    assert verdict.extra()[SPEEDUP_KEY] is None


def test_a_chats_compares_are_read_back_from_its_replies_and_the_first_path_alternates() -> None:
    earlier = Verdict(_result(100.0, 120.0), (), "baseline").extra()
    same = Verdict(_result(100.0, 120.0, ()), (), "optimized").extra()
    extras = [{}, earlier, {"status": "done"}, same, {COMPARE_KEY: "an old chat's line"}]
    found = compares_so_far(extras)
    assert found == [1.2, None, None], "every compare counts; only real ratios give figures"
    assert [first_path(n) for n in range(4)] == ["baseline", "optimized", "baseline", "optimized"]
    assert Verdict(_result(100.0, 130.0), tuple(found)).speedups.values == (1.2, 1.3)


def test_a_divergence_says_the_speed_up_no_longer_compares_the_same_text() -> None:
    from dataclasses import replace

    diverged = replace(_result(100.0, 300.0), parity=TokenParity(256, 256, 9, 5, 6, " staan", " mendatang"))
    line = Verdict(diverged, (), "baseline").summary()
    assert "parity: diverges at token 9: ' staan' vs ' mendatang'" in line
    assert "from token 9 on the two replies are different texts" in line
    assert "different texts" not in Verdict(_result(100.0, 300.0), ()).summary()
