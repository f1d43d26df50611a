"""A call's arguments typed by the tool's JSON schema, not by their look.

The model writes ``zip:02139`` for a string parameter and ``count:<|"|>2<|"|>`` for an integer
one; both are meant as the schema says. ``to_schema`` follows the schema where it names types
(``type``, ``enum``, ``anyOf``/``oneOf``/``allOf``, ``$ref`` into ``$defs``), in the order vLLM's
typed Gemma 4 parser uses (null, integer, number, boolean, object, array, string), with one
difference: a value the model put between ``<|"|>`` delimiters stays a string wherever the
schema allows a string. Where the schema says nothing, a value is typed by its look.
"""

from __future__ import annotations

import json
import math
from typing import Any

from backend.gemma4.call_values import Bare, bare_number, by_look

MAX_REF_DEPTH = 32
"""``$ref`` chains longer than this are not followed (a schema may refer to itself)."""
_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")


def resolve(schema: Any, root: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced by its target."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if not isinstance(ref, str) or depth >= MAX_REF_DEPTH or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        return {k: v for k, v in schema.items() if k != "$ref"}
    merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return resolve(merged, root, depth + 1)


def branches(schema: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives ``schema`` allows: its ``anyOf``/``oneOf`` members (``allOf`` merged), or itself."""
    schema = resolve(schema, root)
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in all_of:
            merged = {**merged, **resolve(part, root)}
        schema = merged
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            rest = {k: v for k, v in schema.items() if k != key}
            return [b for o in options for b in branches({**rest, **resolve(o, root)}, root)]
    return [schema]


def types_of(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """Every JSON type ``schema`` allows (empty: it does not say)."""
    found: set[str] = set()
    for branch in branches(schema, root):
        kind = branch.get("type")
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        for value in branch.get("enum") or ([branch["const"]] if "const" in branch else []):
            found.add(_json_type(value))
        if "properties" in branch and "type" not in branch:
            found.add("object")
        if "items" in branch and "type" not in branch:
            found.add("array")
    return found


def to_schema(value: Any, schema: Any, root: dict[str, Any] | None = None) -> Any:
    """``value`` (as ``parse_written`` returns it) typed as ``schema`` says."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    if not isinstance(schema, dict) or not schema:
        return by_look(value)
    if isinstance(value, dict):
        return {key: to_schema(item, _property(schema, key, root), root) for key, item in value.items()}
    if isinstance(value, list):
        items = _items(schema, root)
        return [to_schema(item, items, root) for item in value]
    types = types_of(schema, root)
    if not types:
        return by_look(value)
    if isinstance(value, str) and not isinstance(value, Bare) and "string" in types:
        return value
    for kind in _ORDER:
        if kind in types:
            converted = _as(kind, str(value))
            if converted is not _NO:
                return converted
    return by_look(value)


def _property(schema: dict[str, Any], key: str, root: dict[str, Any]) -> Any:
    for branch in branches(schema, root):
        properties = branch.get("properties")
        if isinstance(properties, dict) and key in properties:
            return properties[key]
        extra = branch.get("additionalProperties")
        if isinstance(extra, dict):
            return extra
    return None


def _items(schema: dict[str, Any], root: dict[str, Any]) -> Any:
    for branch in branches(schema, root):
        if isinstance(branch.get("items"), dict):
            return branch["items"]
    return None


_NO = object()


def _as(kind: str, text: str) -> Any:
    """``text`` as a value of JSON type ``kind``, or ``_NO``."""
    if kind == "string":
        return text
    if kind == "null":  # revisions before 2026-07-09 write a null argument as Python's None
        return None if text in ("null", "None") else _NO
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.strip().lower(), _NO)
    number = bare_number(text.strip())
    if kind == "integer":
        if isinstance(number, int):
            return number
        return int(number) if isinstance(number, float) and number.is_integer() else _NO
    if kind == "number":
        return number if number is not None else _NO
    try:
        parsed = json.loads(text)
    except ValueError:
        return _NO
    wanted = dict if kind == "object" else list
    return parsed if isinstance(parsed, wanted) and _finite(parsed) else _NO


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string"
