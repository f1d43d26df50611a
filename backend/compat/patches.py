"""Every patch gemma-chat makes to vLLM and its dependencies, declared once, in install order.

Each ``Patch`` names its module in ``backend.compat``, the attributes it replaces or adds (as
``module:Class.attribute``), the switch that turns it on or off (``switch_rules``; none: always
on), its concern and a label. ``install_import_hooks`` (``backend.compat``) installs the hooks in
this order, and the order decides which wrapper runs first where several patch one function: of
``GPUModelRunner.execute_model``'s, ``row_exact_linear``'s is innermost, then ``malloc_trim``'s,
``memory_trace``'s and ``slow_steps``' (the last installed runs first); of
``dispatch_cpu_unquantized_gemm``'s, ``embedding_pack``'s, then ``cpu_linear``'s, then
``row_exact_linear``'s (outermost: it checks what the others chose). ``tests/compat/test_compat_patches.py``
resolves every target in the installed vLLM, so an upgrade that moves one fails a test, and
``wrap`` says so in the engine's log at run time. docs/patches.md explains each. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backend.config import switch_rules as s

Concern = Literal["dependencies", "linear", "speculation", "processes"]

RUNNER = "vllm.v1.worker.gpu_model_runner:GPUModelRunner"
CPU_RUNNER = "vllm.v1.worker.cpu_model_runner:CPUModelRunner"
LINEAR = "vllm.model_executor.layers.utils"
PROPOSER = "vllm.v1.spec_decode.gemma4:Gemma4Proposer"
SPECULATOR = "vllm.v1.worker.gpu.spec_decode.gemma4.speculator:Gemma4Speculator"
CORE = "vllm.v1.engine.core"


@dataclass(frozen=True)
class Patch:
    module: str
    """Its module in ``backend.compat.<concern>``."""
    concern: Concern
    label: str
    targets: tuple[str, ...]
    """``importable.module:Attribute.path``, each resolvable in the installed version."""
    switch: str = ""
    """The ``GEMMA_CHAT_*`` switch that turns it on (or, for a fix, off); "" where none does."""
    optional: bool = False
    """Skipped, with a line in the log, where its target is missing (else the import fails)."""
    hook: bool = True
    """Installed by ``install_import_hooks`` (False: called where it is used)."""


PATCHES: tuple[Patch, ...] = (
    Patch(
        "torchvision_ops",
        "dependencies",
        "torchvision's operators beside CPU torch",
        ("torch.library:Library",),
    ),
    Patch(
        "gemma4_audio",
        "dependencies",
        "Gemma 4's audio tower on the CPU build",
        ("transformers.models.gemma4.modeling_gemma4:Gemma4ClippableLinear.forward",),
    ),
    Patch(
        "embedding_pack",
        "linear",
        "an embedding table packed only when used as a matmul",
        (
            "vllm.model_executor.layers.vocab_parallel_embedding:UnquantizedEmbeddingMethod.process_weights_after_loading",
            f"{LINEAR}:dispatch_cpu_unquantized_gemm",
        ),
        s.EAGER_EMBEDDING_PACK,
    ),
    Patch(
        "forced_linear",
        "linear",
        "an AVX2 CPU's bfloat16 linears on any CPU",
        (f"{LINEAR}:ops.create_onednn_mm", f"{LINEAR}:check_cpu_sgl_kernel", "torch.backends.mkldnn:enabled"),
        s.FORCE_LINEAR,
    ),
    Patch(
        "cpu_linear",
        "linear",
        "the bfloat16 linear kernel",
        (f"{LINEAR}:dispatch_cpu_unquantized_gemm",),
        s.CPU_LINEAR,
    ),
    Patch(
        "row_exact_linear",
        "linear",
        "row-exact verifying steps",
        (f"{LINEAR}:dispatch_cpu_unquantized_gemm", f"{RUNNER}.execute_model"),
        s.ROW_EXACT,
    ),
    Patch(
        "one_call_step",
        "speculation",
        "a decode step in one call to the worker",
        ("vllm.v1.worker.gpu_worker:Worker.execute_model", "vllm.v1.worker.gpu_worker:Worker.sample_tokens"),
        s.ONE_CALL_STEP,
    ),
    Patch(
        "prefill_drafts",
        "speculation",
        "no drafter on a step of prefills or of no drafts",
        (f"{RUNNER}.propose_draft_token_ids", f"{SPECULATOR}.propose"),
        s.NO_PREFILL_DRAFTS,
    ),
    Patch(
        "draft_schedule",
        "speculation",
        "drafts per step changed while the engine runs",
        (f"{CORE}:EngineCore", "vllm.v1.core.sched.scheduler:Scheduler"),
        s.DRAFT_SCHEDULE,
    ),
    Patch(
        "sampled_row_drafts",
        "speculation",
        "the drafter's first pass on its sampled rows only",
        (f"{PROPOSER}.propose", f"{PROPOSER}.set_inputs_first_pass"),
        s.SAMPLED_ROW_DRAFTS,
    ),
    Patch(
        "live_spec_metrics",
        "speculation",
        "draft counts while a reply streams",
        (
            "vllm.v1.core.sched.scheduler:Scheduler.update_from_output",
            "vllm.v1.engine.output_processor:RequestState._new_completion_output",
        ),
        s.LIVE_SPEC_METRICS,
    ),
    Patch(
        "centroid_drafts",
        "speculation",
        "centroid-masked Gemma 4 drafters on a CPU",
        (f"{PROPOSER}._setup_centroids_cuda_graphs", f"{PROPOSER}._greedy_sample"),
        optional=True,
    ),
    Patch(
        "drafter_attention",
        "speculation",
        "the target's per-kind attention kept from the drafter",
        (f"{PROPOSER}._create_draft_vllm_config", f"{SPECULATOR}._create_draft_vllm_config"),
        optional=True,
    ),
    Patch(
        "uni_worker",
        "processes",
        "the CPU worker inside the engine-core process",
        (
            "vllm.platforms.cpu:CpuPlatform.check_and_update_config",
            "vllm.utils.numa_utils:configure_subprocess",
            "vllm.utils.ompmultiprocessing:OMPProcessManager.configure_omp_envs",
            "vllm.v1.executor.uniproc_executor:UniProcExecutor.execute_model",
            "vllm.v1.executor.uniproc_executor:UniProcExecutor._init_executor",
            f"{CORE}:EngineCore.capture_iteration_details",
        ),
        s.UNI_WORKER,
    ),
    Patch(
        "aot_cache_load",
        "dependencies",
        "vLLM's AOT compile cache loads on the CPU build",
        ("torch._dynamo.aot_compile_types:BundledAOTAutogradSerializableCallable",),
        optional=True,
    ),
    Patch(
        "process_lifetime",
        "processes",
        "an engine process ends with its parent",
        (
            f"{CORE}:EngineCoreProc.run_engine_core",
            "vllm.v1.executor.multiproc_executor:WorkerProc.worker_main",
        ),
        s.OWNER,
    ),
    Patch(
        "malloc_trim",
        "processes",
        "freed start memory returned to the system",
        (*(f"{RUNNER}.{m}" for m in ("load_model", "profile_run", "initialize_kv_cache", "execute_model")),),
        s.NO_MALLOC_TRIM,
    ),
    Patch(
        "short_warmup", "processes", "a 16-token warm-up", (f"{CPU_RUNNER}.warming_up_model",), s.FULL_WARMUP
    ),
    Patch(
        "memory_trace",
        "processes",
        "memory after each start stage, in the log",
        (f"{RUNNER}.load_model", f"{RUNNER}._dummy_run", f"{RUNNER}.execute_model"),
        s.MEMORY_TRACE,
    ),
    Patch(
        "slow_steps",
        "processes",
        "every step at least N ms (tests)",
        (f"{RUNNER}.execute_model",),
        s.SLOW_STEP_MS,
    ),
    Patch(
        "early_core",
        "processes",
        "vLLM's engine core started early",
        ("multiprocessing.context:SpawnProcess._Popen", "multiprocessing.spawn:spawn_main"),
        s.EARLY_CORE,
        hook=False,
    ),
    Patch(
        "vllm_cli",
        "dependencies",
        "the `vllm` command on the CPU build",
        ("importlib.metadata:version", "vllm.entrypoints.cli.main:main"),
        hook=False,
    ),
)
"""In install order (``early_core`` and ``vllm_cli`` are not hooks: their callers install them)."""

HOOKS = tuple(patch for patch in PATCHES if patch.hook)
