"""Tool declarations that survive Gemma 4's template, and arguments typed by the tool's schema.

Rendered through google/gemma-4-E2B-it's current template: a nested pydantic model keeps its
fields (``$ref`` into ``$defs`` inlined), ``Optional`` gets its type and ``nullable``, a type list
is one type, arrays of objects keep their items, enums of numbers and defaults are said in the
description — and the arguments the model writes come back typed as the schema says.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel

from backend.gemma4.call_format import parse_output
from backend.gemma4.declarations import template_parameters
from backend.gemma4.messages import ChatMessage
from backend.gemma4.template_messages import template_messages
from backend.tools.spec import Tool
from tests.gemma4.test_template_parity import _tokenizer
from tests.support.published_templates import CURRENT, published

Q = '<|"|>'


class Address(BaseModel):
    street: str
    zip: str


class Colour(StrEnum):
    red = "red"
    blue = "blue"


class Recipient(BaseModel):
    name: str
    to: Address
    cc: list[Address] = []


def send(
    recipient: Recipient,
    note: str | None = None,
    priority: Literal[1, 2, 3] = 2,
    colour: Colour = Colour.red,
    count: int = 1,
) -> str:
    """Send a parcel."""
    return "sent"


MCP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": ["string", "null"], "description": "what to look for"},
        "limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": 10},
        "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}},
        "mode": {"enum": ["fast", "exact"]},
        "when": {"type": "string", "format": "date-time"},
        "anything": {},
    },
    "required": ["query"],
    "$defs": {"Filter": {"type": "object", "properties": {"field": {"type": "string"}, "value": {}}}},
}


def _declaration(tool: Tool) -> str:
    messages = [ChatMessage("user", "hi")]
    prompt = _tokenizer().apply_chat_template(
        template_messages(messages),
        tools=[tool.declaration()],
        chat_template=published(CURRENT),
        tokenize=False,
        add_generation_prompt=True,
    )
    return str(prompt).split("<|tool>", 1)[1].split("<tool|>", 1)[0]


def _clean(declaration: str) -> None:
    assert f"type:{Q}{Q}" not in declaration, "no parameter without a type"
    assert "['" not in declaration and "$ref" not in declaration and "$defs" not in declaration
    assert "anyOf" not in declaration


def test_a_nested_pydantic_model_keeps_its_fields_through_the_template() -> None:
    declaration = _declaration(Tool.from_function(send))
    _clean(declaration)
    assert re.search(r"to:\{properties:\{street:\{type:<\|\"\|>STRING<\|\"\|>\},zip:\{", declaration)
    assert re.search(r"cc:\{description:[^}]*,items:\{properties:\{street:", declaration), "list of models"
    assert f"note:{{description:{Q}Default: null{Q},nullable:true,type:{Q}STRING{Q}}}" in declaration
    assert f'colour:{{description:{Q}Default: "red"{Q}' in declaration
    assert f"enum:[{Q}red{Q},{Q}blue{Q}]" in declaration
    assert "One of: 1, 2, 3; default: 2" in declaration


def test_an_mcp_schema_keeps_its_meaning_through_the_template() -> None:
    tool = Tool("search", "Search.", lambda **_: None, None, schema=MCP_SCHEMA, source="mcp: s")
    declaration = _declaration(tool)
    _clean(declaration)
    assert f"query:{{description:{Q}what to look for{Q},nullable:true,type:{Q}STRING{Q}}}" in declaration
    assert (
        f"limit:{{description:{Q}Minimum: 1; default: 10{Q},nullable:true,type:{Q}INTEGER{Q}}}" in declaration
    )
    assert "filters:{items:{properties:{field:" in declaration and "value:{description:" in declaration
    assert f"mode:{{enum:[{Q}fast{Q},{Q}exact{Q}],type:{Q}STRING{Q}}}" in declaration
    assert f'when:{{description:{Q}Format: "date-time"{Q},type:{Q}STRING{Q}}}' in declaration
    assert "anything:{description:" in declaration and "Any JSON value" in declaration


def test_template_parameters_is_an_object_even_for_odd_schemas() -> None:
    assert template_parameters({}) == {"type": "object"} | template_parameters({})
    assert template_parameters({"type": "string"}) == {"type": "object", "properties": {}}
    looped: dict[str, Any] = {"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
        "child": {"$ref": "#/$defs/Node"}}}}}  # fmt: skip
    assert template_parameters(looped)["type"] == "object", "a schema that refers to itself ends"


def _call(text: str) -> Any:
    (call,) = parse_output(text).calls
    return call


def test_arguments_follow_the_schema_not_their_look() -> None:
    tool = Tool.from_function(send)
    call = _call(
        f"<|tool_call>call:send{{recipient:{{name:{Q}Ann{Q},to:{{street:{Q}Main 1{Q},zip:02139}}}},"
        f"count:{Q}2{Q},priority:3}}<tool_call|>"
    )
    assert call.arguments["recipient"]["to"]["zip"] == 2139, "by look"
    typed = tool.arguments_of(call)
    assert typed["recipient"]["to"]["zip"] == "02139" and typed["count"] == 2 and typed["priority"] == 3
    validated = tool.validate(typed)
    assert validated["recipient"].to.zip == "02139"


def test_an_mcp_tools_quoted_number_becomes_a_number_for_its_validation() -> None:
    schema = {"type": "object", "properties": {"count": {"type": "integer"}, "tag": {"type": "string"}}}
    tool = Tool("m", "M.", lambda **_: None, None, schema=schema)
    call = _call(f"<|tool_call>call:m{{count:{Q}2{Q},tag:007}}<tool_call|>")
    assert tool.validate(tool.arguments_of(call)) == {"count": 2, "tag": "007"}


def test_a_null_the_older_templates_wrote_as_none_reads_as_null_where_null_is_allowed() -> None:
    schema = {
        "type": "object",
        "properties": {"note": {"type": ["string", "null"]}, "word": {"type": "string"}},
    }
    tool = Tool("m", "M.", lambda **_: None, None, schema=schema)
    call = _call("<|tool_call>call:m{note:None,word:None}<tool_call|>")
    assert tool.arguments_of(call) == {"note": None, "word": "None"}
