"""Differential test: gemma-chat's Gemma 4 reader against vLLM 0.32's own parsers.

Random replies (tests/support/gemma4_cases.py: calls written by the published template, thoughts, bare
labels, variants, calls closed by the stop token or cut by the length limit, random schemas) go
through ours (``read_reply`` + ``to_schema``) and through vLLM's ``parse_tool_calls`` and
``parse_thinking_output`` (the offline utilities) and its ``Gemma4Parser`` (the engine parser
behind ``--tool-call-parser gemma4``, typed by the request's tool schemas); tests/support/gemma4_vllm.py
compares them. Ours must give what the case was built from; every disagreement with vLLM must be
one of ``DIFFERENCES`` below, each checked on the values concerned, and each kind's count is
pinned so a new kind (or a change of an old one) fails the test.
docs/gemma4-format.md ("Where gemma-chat reads differently from vLLM") gives the reasons.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from backend.gemma4.reply import read_reply
from tests.support.gemma4_cases import CLOSE, arguments, render_calls, reply, template
from tests.support.gemma4_vllm import kinds_of, same, vllm_parsers

CASES = 1500

# Each known kind of disagreement, named by whose reading differs (utils: vLLM's offline
# parse_tool_calls / parse_thinking_output; engine: its Gemma4Parser). docs/gemma4-format.md has more.
DIFFERENCES = {
    "bare_by_look": "utils keep a bare value (42, true, null) as text; ours types it by its look",
    "nested_as_repr": "utils turn a nested object or array into Python repr text; ours keeps it",
    "utils_standard_only": "utils read only <|tool_call>call:NAME{…} with a \\w+ name; the :NAME{…} and "
    "call:NAME(…) variants and dotted or hyphenated (MCP) names are read by the engine and by ours",
    "utils_bare_call": "finding no <|tool_call>call:…, the utils' fallback runs a bare call:NAME{…} "
    "anywhere in the text (a reply that explains the syntax); ours and the engine do not",
    "utils_thought_needs_close": "utils see no thought without <channel|>; a thought a call ends is "
    "one to ours and to the engine",
    "utils_empty_thought_label": "utils strip before they look for the `thought\\n` label, so an "
    "empty <|channel>thought\\n<channel|> gives the thought `thought`; ours gives none",
    "engine_label_as_thought": "the engine takes a reply that starts with a bare `thought\\n` label "
    "as an unclosed thought (all of it reasoning); ours drops the label, as the utils do",
    "engine_paren_count": "the engine strips the `)` of call:NAME(…) only when the text holds more `)` "
    "than `(`, strings included, so a `(` in a string leaves a value like `null)`",
    "engine_drops_text_after_calls": "the engine drops text written after the calls; ours keeps it "
    "in the answer (nothing the model wrote is lost)",
    "engine_runs_cut_calls": "the engine runs a call the length limit cut (with the arguments so "
    "far); ours runs an unclosed call only when the model ended the reply itself",
    "ours_refuses_bare_phrase": 'vLLM reads `city:New York` (spaces, no <|"|>) as text; ours does not '
    'run it and tells the model to put strings between <|"|>',
    "quoted_stays_string": 'where the schema allows a string, a <|"|>-quoted value stays a string in '
    "ours; the engine converts it by its priority (null>integer>number>boolean)",
    "no_schema_by_look": "where no schema names a parameter, the engine keeps a bare value as "
    "text; ours types it by its look",
    "vllm_direct_schema_only": "the engine follows only a schema's own properties/items (not an "
    "Optional nested object's anyOf); ours follows anyOf/oneOf/allOf/$ref too",
}


@pytest.fixture(scope="module")
def vllm() -> dict[str, Any]:
    pytest.importorskip("vllm.parser.gemma4")
    return vllm_parsers()


def test_every_disagreement_with_vllm_is_a_known_difference(vllm: dict[str, Any]) -> None:
    rng, tpl = random.Random(35), template()
    counts: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    for _ in range(CASES):
        case = reply(rng, tpl)
        shapes.update(case.shape)
        counts.update(kinds_of(case, vllm))
    unexplained = [k for k in counts if k not in DIFFERENCES]
    assert not unexplained, unexplained
    assert min(shapes.values()) >= 20 and len(shapes) == 13, shapes
    assert dict(counts) == EXPECTED, dict(counts)


EXPECTED = {  # cases (of CASES, seed 35) that show each difference; a change here is a change of behaviour
    "bare_by_look": 772,
    "nested_as_repr": 490,
    "utils_standard_only": 327,
    "no_schema_by_look": 174,
    "engine_drops_text_after_calls": 142,
    "engine_label_as_thought": 123,
    "engine_runs_cut_calls": 107,
    "vllm_direct_schema_only": 88,
    "utils_thought_needs_close": 69,
    "ours_refuses_bare_phrase": 40,
    "utils_bare_call": 39,
    "utils_empty_thought_label": 37,
    "quoted_stays_string": 25,
    "engine_paren_count": 1,
}


def test_the_published_serializer_round_trips_through_ours() -> None:
    """Argument dicts written by the template's own ``format_argument`` read back exactly (True is not 1)."""
    rng, tpl = random.Random(4), template()
    for _ in range(1000):
        calls = [(f"tool_{i}", arguments(rng)) for i in range(3)]
        for raw, (name, args) in zip(render_calls(tpl, calls), calls, strict=True):
            reply_ = read_reply(raw)
            assert [(c.name, c.error) for c in reply_.calls] == [(name, None)], raw
            assert same(reply_.calls[0].arguments, args), raw
            assert raw.endswith(CLOSE)
