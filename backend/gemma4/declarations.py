"""A tool's JSON schema in the shape Gemma 4's chat template can write.

The published template writes each parameter's ``description``, ``type`` (upper-cased),
``enum`` (for strings), ``nullable``, an object's ``properties``/``required`` and an array's
``items`` — and nothing else. Pydantic and MCP schemas say more, in other words: ``$ref`` into
``$defs``, ``anyOf`` for ``Optional``, type lists such as ``["string", "null"]``, enums of
numbers, defaults, formats and bounds. Written as they are, nested models lose their fields,
optional parameters get an empty type and a type list turns into ``['STRING', 'NULL']``.
``template_parameters`` rewrites a schema into that smaller vocabulary: references inlined,
a single non-null alternative with ``nullable``, several alternatives and everything the
template cannot write (enums of other types, defaults, formats, bounds) said in the
description. The schema itself is untouched: arguments are still validated against it.
"""

from __future__ import annotations

import json
from typing import Any

from backend.gemma4.schema_values import branches, types_of

MAX_DEPTH = 12
"""Deeper nesting (or a schema that refers to itself) is described, not expanded."""
_NOTED = ("format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
          "maxLength", "pattern", "minItems", "maxItems", "multipleOf", "default")  # fmt: skip
_PREFERRED = ("object", "array", "string", "number", "integer", "boolean")


def template_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments' schema as an object of properties the template writes without loss."""
    root = schema
    top = _parameter(schema, root, 0)
    if top["type"] != "object":  # arguments are always an object of named parameters
        return {"type": "object", "properties": {}}
    top.pop("nullable", None)
    top.pop("description", None)
    return top


def _parameter(schema: Any, root: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {"type": "string"}
    options = branches(schema, root)
    nullable = any(types_of(o, root) == {"null"} for o in options)
    real = [o for o in options if types_of(o, root) != {"null"}] or options
    chosen = _choose(real, root)
    kinds = types_of(chosen, root) - {"null"}
    nullable = nullable or "null" in types_of(chosen, root)
    kind = next((k for k in _PREFERRED if k in kinds), "string")
    notes: list[str] = []
    out: dict[str, Any] = {}
    description = chosen.get("description") or schema.get("description")
    if len(real) > 1:
        alternatives = sorted({k for o in real for k in types_of(o, root) - {"null"}} or {"any"})
        notes.append(f"one of the types: {', '.join(alternatives)}")
    elif len(kinds) > 1:
        notes.append(f"one of the types: {', '.join(sorted(kinds))}")
    elif not kinds:
        notes.append("any JSON value")
    values = chosen.get("enum") if isinstance(chosen.get("enum"), list) else None
    if values is None and "const" in chosen:
        values = [chosen["const"]]
    if values is not None:
        if kind == "string" and all(isinstance(v, str) for v in values):
            out["enum"] = list(values)
        else:
            notes.append(f"one of: {', '.join(json.dumps(v, ensure_ascii=False) for v in values)}")
    notes += [f"{key}: {json.dumps(chosen[key], ensure_ascii=False)}" for key in _NOTED if key in chosen]
    if kind == "object":
        _object(chosen, root, depth, out, notes)
    elif kind == "array":
        _array(chosen, root, depth, out, notes)
    text = str(description or "").strip()
    if notes:
        said = "; ".join(notes)
        text = f"{text} ({said})" if text else said[:1].upper() + said[1:]
    if text:
        out["description"] = text
    if nullable:
        out["nullable"] = True
    out["type"] = kind
    return out


def _choose(options: list[dict[str, Any]], root: dict[str, Any]) -> dict[str, Any]:
    """The alternative the declaration shows: an object or array over a scalar, else the first."""
    for wanted in _PREFERRED:
        for option in options:
            if wanted in types_of(option, root):
                return option
    return options[0]


def _object(
    schema: dict[str, Any], root: dict[str, Any], depth: int, out: dict[str, Any], notes: list[str]
) -> None:
    properties = schema.get("properties")
    if depth >= MAX_DEPTH:
        notes.append("a nested object (too deep to spell out here)")
        return
    if isinstance(properties, dict) and properties:
        out["properties"] = {
            str(name): _parameter(value, root, depth + 1) for name, value in properties.items()
        }
        required = [r for r in schema.get("required") or [] if isinstance(r, str) and r in properties]
        if required:
            out["required"] = required
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        inner = _parameter(extra, root, depth + 1)
        notes.append(f"any keys, each value of type {inner['type']}")
    elif not properties and extra is not False:
        notes.append("any keys")


def _array(
    schema: dict[str, Any], root: dict[str, Any], depth: int, out: dict[str, Any], notes: list[str]
) -> None:
    items = schema.get("items")
    if depth >= MAX_DEPTH:
        notes.append("a nested array (too deep to spell out here)")
        return
    if isinstance(items, dict) and items:
        out["items"] = _parameter(items, root, depth + 1)
    elif isinstance(items, list) and items:  # a tuple schema: its positions, in words
        kinds = [_parameter(i, root, depth + 1)["type"] for i in items]
        notes.append(f"items in order: {', '.join(kinds)}")
