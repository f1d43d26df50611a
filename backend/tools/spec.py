"""A tool is a plain typed Python function: its docstring describes it, its signature is its schema.

``Tool.from_function`` builds the JSON schema with pydantic (so ``int``, ``list[str]``,
``Literal[...]``, nested models and defaults all work) and validates the model's arguments
against the same pydantic model before the function runs. A tool from an MCP server brings its
own JSON schema instead (``schema``), and its arguments are validated against that.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from backend.gemma4.tool_call import ToolCall


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's schema."""


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns when its result carries images beside its value."""

    value: Any
    images: tuple[str, ...] = ()
    """Kept image files (``backend.tools.result_images``), shown in the timeline and, where the
    model sees images, given to it with the result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    arguments_model: type[BaseModel] | None
    side_effects: bool = False
    """True if running it changes something outside the chat (approval asks first)."""
    timeout_s: float = 10.0
    schema: dict[str, Any] | None = None
    """The arguments' JSON schema where there is no pydantic model (an MCP server's tool)."""
    source: str = "built-in"
    """Where it comes from: ``built-in``, a plug-in's entry point, ``mcp: NAME``."""

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        side_effects: bool = False,
        timeout_s: float = 10.0,
    ) -> Tool:
        doc = inspect.getdoc(function) or ""
        if not doc:
            raise ValueError(f"tool {function.__name__!r} needs a docstring: it is the model's description")
        return cls(
            name=name or function.__name__,
            description=doc.split("\n\n")[0].replace("\n", " "),
            function=function,
            arguments_model=_arguments_model(function),
            side_effects=side_effects,
            timeout_s=timeout_s,
        )

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, without pydantic's titles."""
        if self.arguments_model is None:
            return self.schema or {"type": "object", "properties": {}}
        return strip_titles(self.arguments_model.model_json_schema())

    def declaration(self) -> dict[str, Any]:
        """The OpenAI-style declaration the chat template renders as ``<|tool>declaration:…``, its
        parameters in the shape the template writes without loss (``backend.gemma4.declarations``)."""
        from backend.gemma4.declarations import template_parameters

        parameters = template_parameters(self.parameters())
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    def arguments_of(self, call: ToolCall) -> dict[str, Any]:
        """The call's arguments as this tool's schema types them: what the model wrote without
        ``<|"|>`` delimiters (``zip:02139``) stays text for a string parameter, a quoted number
        becomes a number for a numeric one."""
        from backend.gemma4.schema_values import to_schema

        if call.written is None:
            return call.arguments
        typed = to_schema(call.written, self.parameters())
        return typed if isinstance(typed, dict) else call.arguments

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments coerced to the schema (``"3"`` → 3 for an int), or ``ToolArgumentsError``."""
        if self.arguments_model is None:
            return self._validate_schema(arguments)
        try:
            model = self.arguments_model.model_validate(arguments)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}") from None
        return {key: getattr(model, key) for key in type(model).model_fields}

    def _validate_schema(self, arguments: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.validate(arguments, self.parameters())
        except jsonschema.ValidationError as error:
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {where}: {error.message}") from None
        except jsonschema.SchemaError as error:
            raise ToolArgumentsError(f"{self.name} declares an unusable schema: {error.message}") from None
        return arguments


def tool(
    *, side_effects: bool = False, timeout_s: float = 10.0, name: str | None = None
) -> Callable[[Callable[..., Any]], Tool]:
    """Decorator for plug-in authors: ``@tool(side_effects=True)`` over a typed function."""

    def wrap(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(function, name=name, side_effects=side_effects, timeout_s=timeout_s)

    return wrap


def _arguments_model(function: Callable[..., Any]) -> type[BaseModel]:
    signature = inspect.signature(function)
    hints = _resolved_hints(function)
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ValueError(f"tool {function.__name__!r}: *args/**kwargs cannot be described to the model")
        if parameter.name not in hints:
            raise ValueError(f"tool {function.__name__!r}: parameter {parameter.name!r} needs a type")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    config = ConfigDict(extra="forbid")
    return create_model(f"{function.__name__}_arguments", __config__=config, **fields)


def _resolved_hints(function: Callable[..., Any]) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(function, include_extras=True)


def strip_titles(schema: Any, *, names: bool = False) -> Any:
    """Drop pydantic's generated ``title`` keys (not properties that happen to be called ``title``)."""
    if isinstance(schema, dict):
        return {
            k: strip_titles(v, names=k in ("properties", "$defs") and not names)
            for k, v in schema.items()
            if names or not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema
