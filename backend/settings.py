"""Settings: one TOML file under the user config directory, overridden by ``GEMMA_CHAT_*``
environment variables, overridden by command-line flags. Nothing is read at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from backend import paths


class EngineSettings(BaseModel):
    """How an engine is sized and started (both paths use the same values)."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Model dtype; auto keeps the checkpoint's own (bfloat16 for Gemma 4 E2B)."""
    max_model_len: int | None = Field(default=None, ge=256, le=131072)
    """Context window in tokens (up to Gemma 4's 128K); unset picks one from this machine's memory."""
    kv_cache_gib: int = Field(default=2, ge=1)
    """CPU only: GiB (whole) of host memory for each engine's KV cache."""
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=0.95)
    """GPU only: fraction of GPU memory each engine may take."""
    seed: int = 0
    """Engine seed, so greedy and seeded runs repeat."""
    speculation: Literal["auto", "mtp", "ngram", "none"] = "auto"
    """Optimized path's speculative decoding. auto: what `gemma-chat profiles --measure` found
    fastest for the model here; unmeasured, the MTP drafter on a GPU and none on a CPU (where a
    verifying step costs about three plain ones). mtp/ngram/none force a method."""
    draft_tokens: int = Field(default=2, ge=1, le=8)
    """Draft tokens per step when ``speculation`` forces mtp or ngram (and unmeasured on a GPU)."""
    cpu_all_cores: bool = False
    """CPU, optimized path: run the model on every core instead of vLLM's default (one core kept
    for the front end). Faster, but other thread counts change bfloat16 rounding: measured
    16/19 parity prompts identical in bfloat16 (19/19 in float32), so it is off by default."""


class MediaSettings(BaseModel):
    """Limits and choices for attachments."""

    max_image_mb: float = Field(default=20.0, gt=0)
    """Largest image file accepted, in MB."""
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


class ToolSettings(BaseModel):
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


def config_file() -> Path:
    return paths.config_dir() / "config.toml"


class Settings(BaseSettings):
    """Everything configurable. ``GEMMA_CHAT_ENGINE__MAX_MODEL_LEN=4096`` sets a nested value."""

    model_config = SettingsConfigDict(env_prefix="GEMMA_CHAT_", env_nested_delimiter="__", extra="ignore")

    model: str = "google/gemma-4-E2B-it"
    """A local checkpoint directory or a Hugging Face model id."""
    demo: bool = False
    """Use the generated demo checkpoint instead of ``model`` (works offline)."""
    profile: Literal["baseline", "optimized", "eager"] = "optimized"
    """The engine path for new turns."""
    engine: EngineSettings = Field(default_factory=EngineSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    max_tokens: int = Field(default=1024, ge=1)
    """Reply budget in tokens for chat turns."""
    trim_history: bool = False
    """Drop the oldest turns of a chat that outgrows the context window (and say so) instead of refusing."""
    data_dir: Path | None = None
    """Where chats are stored (default: the platform's user data directory)."""
    theme: str = "textual-dark"
    """Textual theme name (Ctrl+P → theme to try them)."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Rebind keys by binding id, e.g. ``toggle_path = "f6"`` (see F1 for the ids)."""

    def history_path(self) -> Path:
        return (self.data_dir or paths.data_dir()) / "history.db"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file())
        return (init_settings, env_settings, toml)


def load_settings(**overrides: Any) -> Settings:
    """Settings from file and environment, with ``overrides`` (flags; None means unset) on top."""
    flags = {key: value for key, value in overrides.items() if value is not None}
    engine_flags = {key: flags.pop(key) for key in list(flags) if key in EngineSettings.model_fields}
    settings = Settings(**flags)
    if engine_flags:
        merged = settings.engine.model_copy(update=engine_flags)
        settings = settings.model_copy(update={"engine": EngineSettings.model_validate(merged.model_dump())})
    return settings
