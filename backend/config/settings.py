"""Settings: one TOML file under the user config directory, overridden by ``GEMMA_CHAT_*``
environment variables, overridden by command-line flags. Nothing is read at import.

Nothing wrong is dropped in silence: an unknown key (``[tools] allowed_dir``, ``[tool]``), a
value of the wrong type, a TOML syntax error or an unreadable file raises ``SettingsError``
naming the file (or the variable, or the flag), the key, the reason and — for a typo — the key
that was meant.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from backend.config import locations, renamed
from backend.errors import GemmaChatError

ENV_PREFIX = "GEMMA_CHAT_"


class SettingsError(GemmaChatError):
    """A setting that cannot be used: where it came from, the key, and why."""


class Strict(BaseModel):
    """A settings table: unknown keys are refused, not dropped."""

    model_config = ConfigDict(extra="forbid")


class EngineSettings(Strict):
    """How an engine is sized and started (both paths use the same values)."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Model dtype; auto keeps the checkpoint's own (bfloat16 for Gemma 4 E2B)."""
    max_model_len: int | None = Field(default=None, ge=256, le=131072)
    """Context window in tokens (up to Gemma 4's 128K); unset picks one from this machine's memory."""
    kv_cache_gib: float | None = Field(default=None, gt=0, le=1024)
    """CPU only: GiB of host memory for each engine's KV cache; unset sizes it for the model
    (16 full-window requests, 0.25-2 GiB: ``backend/engine/cpu/kv_size.py``)."""
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=0.95)
    """GPU only: the most of the card gemma-chat's engines may take together; one engine alone gets
    all of it, two side by side split it (the memory plan, ``gemma-chat paths``)."""
    seed: int = Field(default=0, ge=0, lt=2**63)
    """Engine seed, so greedy and seeded runs repeat."""
    speculation: Literal["auto", "mtp", "ngram", "none"] = "auto"
    """Optimized path's speculative decoding. auto: on a CPU, what the optimized engine's first
    start measured for the model here (0 to 4 drafts of its MTP drafter, else ngram; none where no
    count paid), or what `gemma-chat paths --measure` found; on a GPU, the MTP drafter unless
    `paths --measure` found otherwise. mtp/ngram/none force a method."""
    draft_tokens: int = Field(default=2, ge=1, le=8)
    """Draft tokens per step when ``speculation`` forces mtp or ngram (and unmeasured on a GPU)."""
    cpu_all_cores: bool = False
    """CPU, optimized path: run the model on every core instead of vLLM's default (one core kept
    for the front end). Faster, but other thread counts change bfloat16 rounding: measured
    16/19 parity prompts identical in bfloat16 (19/19 in float32), so it is off by default."""
    # -- GPU placement and exactness (docs/gpu.md) --
    both_paths: Literal["auto", "side-by-side", "swap"] = "auto"
    """How the two paths share one GPU. auto: side by side where both engines fit, else swap
    (F2 and compare put one engine to sleep, or stop it, to run the other). swap also works on
    the CPU (stop one engine, start the other), to try it there."""
    exact: bool = False
    """GPU only: vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT) on both paths, so compare's
    tokens can match on a GPU; slower. Refused on the CPU build (it dies on the first request)."""
    drafter: str | None = None
    """The MTP drafter's folder (else found in the model folder, a sibling *-assistant folder or the
    Hugging Face cache)."""


class MediaSettings(Strict):
    """Limits and choices for attachments."""

    max_image_mb: float = Field(default=20.0, gt=0)
    """Largest image file accepted, in MB."""
    max_image_megapixels: float = Field(default=50.0, gt=0)
    """Largest image accepted, in millions of pixels (checked before it is decoded)."""
    long_audio: Literal["trim", "refuse"] = "trim"
    """Audio longer than Gemma 4's 30 s: keep the first 30 s (with a notice) or refuse it."""
    max_video_frames: int = Field(default=32, ge=1, le=64)
    """Frames sampled evenly from a video (70 soft tokens each)."""
    max_video_minutes: float = Field(default=10.0, gt=0)
    """Longest video accepted."""
    video_audio: bool = False
    """Also attach a video's sound track as audio (Gemma 4 hears it; 25 tokens a second, 30 s at most)."""


ApprovalPolicy = Literal["side-effects", "every-call", "never"]
APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = ("side-effects", "every-call", "never")


class ToolSettings(Strict):
    """Tool calling (built-ins and ``gemma_chat.tools`` plug-ins)."""

    enabled: bool = True
    """Declare the tools to the model (off: plain chat)."""
    allowed_dirs: list[str] = Field(default_factory=lambda: ["."])
    """Directories read_file and list_directory may read ("." = where gemma-chat was started)."""
    approval: ApprovalPolicy = "side-effects"
    """Ask before running: tools with side effects (default), every call, or never."""
    max_steps: int = Field(default=5, ge=1, le=20)
    """Model steps per turn (each may call tools) before the loop stops."""
    max_result_chars: int = Field(default=4000, ge=100)
    """A tool result longer than this is cut before the model reads it."""


MCP_SERVER_NAME = r"^[A-Za-z_][A-Za-z0-9_-]*$"
"""A server's tools are offered as ``NAME.tool``: no dots in NAME, so the split is unambiguous."""


class McpServerSettings(Strict):
    """One MCP server: ``command`` (+ ``args``, ``env``, ``cwd``) over stdio, or ``url`` (+ ``headers``)
    over streamable HTTP."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    """For starting up, listing tools, and each call."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a stdio server) or url (streamable HTTP), not both or neither"
            )
        return self

    def transport(self) -> str:
        return f"stdio: {' '.join([self.command or '', *self.args])}" if self.command else f"http: {self.url}"


class McpSettings(Strict):
    """Model Context Protocol servers whose tools join the built-ins."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    import_file: str | None = Field(default=None, alias="import")
    """A Claude-Desktop-style ``{"mcpServers": …}`` JSON file whose servers are added (``servers`` wins)."""

    @model_validator(mode="after")
    def _names(self) -> McpSettings:
        import re

        bad = [name for name in self.servers if not re.match(MCP_SERVER_NAME, name)]
        if bad:
            raise ValueError(
                f"server name {bad[0]!r}: use letters, digits, _ and - (its tools are NAME.tool)"
            )
        return self


def config_file() -> Path:
    return locations.config_dir() / "config.toml"


class Settings(BaseSettings):
    """Everything configurable. ``GEMMA_CHAT_ENGINE__MAX_MODEL_LEN=4096`` sets a nested value."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    model: str = "google/gemma-4-E2B-it"
    """A local checkpoint directory or a Hugging Face model id."""
    demo: bool = False
    """Use the generated demo checkpoint instead of ``model`` (works offline)."""
    path: Literal["baseline", "optimized", "eager"] = "optimized"
    """The engine path for new turns (formerly ``profile``, still accepted: ``backend.config.renamed``)."""
    engine: EngineSettings = Field(default_factory=EngineSettings)
    server: str | None = None
    """A vLLM server (``http://host:port``) that serves the optimized path instead of an in-process engine."""
    baseline_server: str | None = None
    """A vLLM server for the baseline path (compare mode against two servers)."""
    api_key: str | None = None
    """The servers' API key (``GEMMA_CHAT_API_KEY``)."""
    media: MediaSettings = Field(default_factory=MediaSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    max_tokens: int = Field(default=1024, ge=1)
    """Reply budget in tokens for chat turns."""
    think: bool = False
    """Gemma 4's thinking mode for new chats: the model writes a thought before its answer (shown
    collapsed). Off by default, as in the model's chat template; each chat keeps its own (F6)."""
    trim_history: bool = False
    """Drop the oldest turns of a chat that outgrows the context window (and say so) instead of refusing."""
    data_dir: Path | None = None
    """Where chats are stored (default: the platform's user data directory)."""
    theme: str = "textual-dark"
    """Textual theme name (Ctrl+P → theme to try them)."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Rebind keys by binding id, e.g. ``toggle_path = "f12"`` (see F1 for the ids)."""

    def history_path(self) -> Path:
        return (self.data_dir or locations.data_dir()) / "history.db"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, OldVariables(settings_cls), ConfigFile(settings_cls))


def read_config(path: Path) -> dict[str, Any]:
    """The config file's tables ({} when there is none); a file that cannot be read raises."""
    from backend.config.file_checks import parse_bounded, read_checked

    try:
        raw = read_checked(path)
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise SettingsError(f"The config file {error}.", "Make it a plain TOML file.") from None
    except OSError as error:
        raise SettingsError(f"The config file {path} cannot be read ({error.strerror or error}).") from None
    try:
        return parse_bounded(tomllib.loads, raw.decode("utf-8"), f"The config file {path}")
    except UnicodeDecodeError as error:
        raise SettingsError(
            f"The config file {path} is not UTF-8 text (byte {error.start}).", "Save it as UTF-8."
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(
            f"The config file {path} is not valid TOML: {error}.", "Fix that line (TOML: key = value)."
        ) from None
    except ValueError as error:  # nested too deeply
        raise SettingsError(f"{error}.", "Write the settings as flat tables (see the README).") from None


class ConfigFile(PydanticBaseSettingsSource):
    """The TOML config file, read with errors that name it; old key names are read under their new
    ones (``backend.config.renamed``)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns the whole file

    def __call__(self) -> dict[str, Any]:
        return renamed.from_file(read_config(config_file()))[0]


class OldVariables(PydanticBaseSettingsSource):
    """Renamed settings' old variables (``GEMMA_CHAT_PROFILE``), below the current ones."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns them all

    def __call__(self) -> dict[str, Any]:
        return renamed.from_environment(ENV_PREFIX)[0]


def renamed_in_use() -> list[str]:
    """A note for each old setting name in use (the file's keys, the environment's variables), for
    the command line to say once."""
    return renamed.from_file(read_config(config_file()))[1] + renamed.from_environment(ENV_PREFIX)[1]


def load_settings(**overrides: Any) -> Settings:
    """Settings from file and environment, with ``overrides`` (flags; None means unset) on top."""
    from pydantic_settings import SettingsError as SourceError

    from backend.config.settings_env import unknown_variables
    from backend.config.switch_rules import check_environment

    for name, hint in unknown_variables(Settings, ENV_PREFIX)[:1]:
        raise SettingsError(f"In the environment: {name} is not a setting gemma-chat knows.", hint)
    check_environment()  # the switches, before an engine's process reads them
    flags = {key: value for key, value in overrides.items() if value is not None}
    engine_flags = {key: flags.pop(key) for key in list(flags) if key in EngineSettings.model_fields}
    try:
        settings = Settings(**flags)
        if engine_flags:
            merged = {**settings.engine.model_dump(), **engine_flags}
            settings = settings.model_copy(update={"engine": EngineSettings.model_validate(merged)})
    except ValidationError as error:
        raise _explained(error, flags, engine_flags) from None
    except SourceError as error:  # a variable's value that is not JSON where a list or table is needed
        raise _bad_variable(str(error)) from None
    return settings


def _bad_variable(reason: str) -> SettingsError:
    import re

    field = re.search(r'field "([^"]+)"', reason)
    key = (field.group(1) if field else "").upper()
    names = sorted(n for n in os.environ if n.upper().startswith(ENV_PREFIX + key)) if key else []
    shown = ", ".join(names) or f"a {ENV_PREFIX}* variable"
    return SettingsError(
        f"In the environment: {shown} has a value gemma-chat cannot read ({reason}).",
        f"Lists and tables are JSON there, e.g. {ENV_PREFIX}TOOLS__ALLOWED_DIRS='[\"/tmp\"]'.",
    )


def _explained(error: ValidationError, flags: dict[str, Any], engine_flags: dict[str, Any]) -> SettingsError:
    """The first problem of ``error``: where the value came from, the key, the reason, a likely fix."""
    problem = error.errors()[0]
    loc = tuple(str(part) for part in problem["loc"])
    if problem["type"] == "extra_forbidden" and engine_flags and not loc:
        loc = ("engine",)
    key = ".".join(loc) or "?"
    table, name = (f"[{'.'.join(loc[:-1])}] " if len(loc) > 1 else ""), loc[-1] if loc else "?"
    shown = f"[{name}]" if isinstance(problem.get("input"), dict) and len(loc) == 1 else name
    where = _origin(loc, flags, engine_flags)
    if problem["type"] == "extra_forbidden":
        known = _known_keys(loc[:-1])
        meant = difflib.get_close_matches(name, known, n=1)
        hint = f"Did you mean {meant[0]}? " if meant else ""
        return SettingsError(
            f"{where}: {table}{shown} is not a setting gemma-chat knows.",
            f"{hint}Known here: {', '.join(sorted(known))}.",
        )
    return SettingsError(
        f"{where}: {key} = {problem.get('input')!r} is not valid: {problem['msg']}.",
        "See docs/configuration.md for each setting's values.",
    )


def _origin(loc: tuple[str, ...], flags: dict[str, Any], engine_flags: dict[str, Any]) -> str:
    if loc and (loc[0] in flags or loc[-1] in engine_flags):
        return "On the command line"
    env = ENV_PREFIX + "__".join(loc).upper()
    if env in os.environ:
        return f"In the environment ({env})"
    return f"In {config_file()}"


def _known_keys(table: tuple[str, ...]) -> list[str]:
    model: type[BaseModel] = Settings
    for part in table:
        annotation = model.model_fields[part].annotation if part in model.model_fields else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
