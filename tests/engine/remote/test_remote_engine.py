"""The engine on a real vLLM server: `gemma-chat serve` starts `vllm serve` (CPU build) on the tiny
checkpoint on 127.0.0.1 (float32, the eager path for start-up time); the remote engine must give
the in-process engine's greedy tokens, the server's prompt token ids must be local tokenization,
figures must come back (KV use from /metrics, the parallel layout from /server_info), images and
audio must travel as data URLs to the same tokens, a server that tokenizes differently must be
caught, a cancel must free the server, compare and bench must run against it, and a killed server
must give a readable failure while the client keeps working."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.checkpoints import GeneratedCheckpoint
from backend.engine.local.vllm import VllmEngine
from backend.engine.parity import tokenization_difference
from backend.engine.protocol import Cancelled, Delta, EngineRequest, Failed, Finished, SamplingSettings
from backend.engine.remote.engine import RemoteEngine
from backend.engine.remote.server_http import remote_label
from backend.errors import EngineStartFailed
from backend.gemma4.messages import ChatMessage

pytestmark = pytest.mark.engine
ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 300


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", *args]


def _run_cli(home: Path, words: str, *more: str) -> subprocess.CompletedProcess[str]:
    """``gemma-chat WORDS MORE…`` as a user runs it (``words`` split on spaces)."""
    return subprocess.run(
        _cli(*words.split(" "), *more),
        cwd=ROOT,
        env={**os.environ, "GEMMA_CHAT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tiny: GeneratedCheckpoint, gemma_home: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    (gemma_home / "logs").mkdir(parents=True, exist_ok=True)
    log = (gemma_home / "logs" / "vllm-serve.log").open("wb")
    flags = [
        "--model",
        str(tiny.model),
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
        "--kv-cache-gib",
        "1",
    ]
    process = subprocess.Popen(
        _cli("serve", "--path", "eager", "--dev-endpoints", "--port", str(port), *flags),
        cwd=ROOT,
        env={**os.environ, "GEMMA_CHAT_HOME": str(gemma_home)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert process.poll() is None, f"vllm serve exited: see {log.name}"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "vllm serve did not become healthy"
        time.sleep(1)
    yield url, process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    log.close()


def _request(engine: RemoteEngine | VllmEngine, rid: str, text: str, tokens: int = 24) -> EngineRequest:
    prompt = engine.render([ChatMessage("user", text)]).text
    return EngineRequest(rid, prompt, sampling=SamplingSettings(max_tokens=tokens, ignore_eos=True))


def _running(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("vllm:num_requests_running"):
                return float(line.rsplit(" ", 1)[1])
    return -1.0


async def test_the_server_gives_the_in_process_engines_tokens(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint, eager_engine: VllmEngine
) -> None:
    url, _ = server
    remote = RemoteEngine(url, tiny.model, name="optimized")
    info = await remote.start()
    assert info.max_model_len == 1024 and info.engine_args["server"] == url
    try:
        for text in ("Hello there, how are you?", "Write a haiku about rivers."):
            request = _request(remote, f"remote-{len(text)}", text)
            events = [event async for event in remote.stream(request)]
            final = events[-1]
            assert isinstance(final, Finished), final
            local = [
                event
                async for event in eager_engine.stream(_request(eager_engine, f"local-{len(text)}", text))
            ]
            assert isinstance(local[-1], Finished)
            assert final.token_ids == local[-1].token_ids, "greedy tokens as in process"
            assert final.text == local[-1].text
            assert list(remote.last_prompt_token_ids) == remote.prompt_token_ids(request.prompt)
            assert sum(len(e.token_ids) for e in events if isinstance(e, Delta)) == 24
            m = final.metrics
            assert m.generated_tokens == 24 and m.prompt_tokens == len(remote.last_prompt_token_ids)
            assert m.ttft_s is not None and m.ttft_s > 0 and m.decode_tokens_per_s and m.e2e_s
            assert m.kv_cache_usage is not None and 0 <= m.kv_cache_usage <= 1, "from /metrics"
            assert await tokenization_difference(remote, request.prompt) is None
        assert info.engine_args["tensor_parallel_size"] == 1, "from /server_info (dev endpoints)"
        assert remote_label(info.engine_args) == f"remote: {url.split('://')[1]} · TP 1"
    finally:
        await remote.shutdown()


async def test_images_and_audio_go_as_data_urls_and_give_the_same_tokens(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint, eager_engine: VllmEngine
) -> None:
    """A media turn travels to /v1/chat/completions as our rendered prompt cut at its placeholders;
    the server's processor expands them as the in-process one does: the same greedy tokens."""
    from backend.media import synthetic

    url, _ = server
    remote = RemoteEngine(url, tiny.model)
    info = await remote.start()
    assert {"image", "audio"} <= info.modalities
    message = ChatMessage("user", "Describe both.", media=("image", "audio"))
    media = {"image": [synthetic.image(1, 96, 64)], "audio": [synthetic.audio(2, 1.5)]}
    finals = []
    try:
        for engine in (remote, eager_engine):
            prompt = engine.render([message]).text
            sampling = SamplingSettings(max_tokens=12, ignore_eos=True)
            request = EngineRequest(f"media-{len(finals)}", prompt, multi_modal_data=media, sampling=sampling)
            finals.append([event async for event in engine.stream(request)][-1])
        assert isinstance(finals[0], Finished) and isinstance(finals[1], Finished), finals
        assert finals[0].token_ids == finals[1].token_ids
        assert finals[0].metrics.prompt_tokens == len(remote.last_prompt_token_ids) > 100, "soft tokens"
        video = {"video": [object()]}
        refused = [
            e async for e in remote.stream(EngineRequest("video", "<|video|>", multi_modal_data=video))
        ]
        assert (
            isinstance(refused[-1], Failed)
            and "A video cannot be sent to a vLLM server" in refused[-1].message
        )
    finally:
        await remote.shutdown()


async def test_a_server_that_tokenizes_differently_is_refused_at_connect_time(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """The demo model's tokenizer here, the tiny checkpoint's on the server (a wrong --model): one
    readable refusal before any turn (compare checks each prompt again: tests/chat/test_pipeline.py)."""
    from backend.engine.model.source import resolve

    url, _ = server
    with pytest.raises(EngineStartFailed, match="whose tokenizer differs from the one here") as refused:
        await RemoteEngine(url, resolve("", demo=True).path).start()
    assert refused.value.fix == "Pass --model DIR with the served model's own tokenizer files."


def test_bench_runs_over_http_against_the_server(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint, gemma_home: Path, tmp_path: Path
) -> None:
    """`bench --server URL --baseline-server URL`: both paths on one server is one engine
    ("nothing applies"); the requests go over HTTP, concurrently for the throughput workload."""
    url, _ = server
    report = tmp_path / "bench.json"
    run = _run_cli(
        gemma_home,
        f"bench --model {tiny.model} --server {url} --baseline-server {url} --workload throughput "
        "--workload single --requests 4 --max-tokens 8 --repetitions 2",
        "--json",
        str(report),
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert "optimized = baseline on this machine: nothing applies" in run.stdout
    assert "requests went over HTTP" in run.stdout
    data = json.loads(report.read_text())
    assert data["same_paths"] is True and data["paths"]["baseline"]["engine_args"]["server"] == url
    throughput = data["paths"]["baseline"]["workloads"]["throughput"]
    assert len(throughput) == 2 and all(len(rep["requests"]) == 4 for rep in throughput)
    assert all(r["tokens"] == 8 and r["figures"]["ttft_s"] for rep in throughput for r in rep["requests"])


async def test_a_cancel_frees_the_server(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint
) -> None:
    url, _ = server
    remote = RemoteEngine(url, tiny.model)
    await remote.start()
    request = _request(remote, "long", "Tell me a very long story.", tokens=900)
    seen = 0
    final = None
    async for event in remote.stream(request):
        if isinstance(event, Delta):
            seen += 1
            if seen == 3:
                await remote.abort("long")
        final = event
    assert isinstance(final, Cancelled) and 0 < len(final.token_ids) < 900
    deadline = time.monotonic() + 20
    while _running(url) != 0:
        assert time.monotonic() < deadline, "the server kept generating after the stream closed"
        await asyncio.sleep(0.2)
    await remote.shutdown()


def test_compare_against_the_server_says_identical(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint, gemma_home: Path
) -> None:
    """`ask --path compare` with both paths on servers (the same one twice: nothing applies)."""
    url, _ = server
    run = _run_cli(
        gemma_home,
        f"ask --model {tiny.model} --path compare --server {url} --baseline-server {url} "
        "--no-tools --max-tokens 16 Hello!",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "parity: identical (16 tokens)" in run.stdout + run.stderr
    assert "optimized = baseline on this machine: nothing applies" in run.stdout + run.stderr


async def test_no_server_and_a_killed_server_give_readable_failures(
    server: tuple[str, subprocess.Popen[bytes]], tiny: GeneratedCheckpoint
) -> None:
    with pytest.raises(EngineStartFailed, match="cannot be reached"):
        await RemoteEngine(f"http://127.0.0.1:{_free_port()}", tiny.model).start()
    url, process = server
    remote = RemoteEngine(url, tiny.model)
    await remote.start()
    request = _request(remote, "doomed", "Count to a thousand.", tokens=900)
    final = None
    async for event in remote.stream(request):
        if isinstance(event, Delta) and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        final = event
    assert isinstance(final, Failed | Finished | Cancelled)
    if isinstance(final, Failed):
        assert "stopped answering" in final.message or "refused" in final.message
    after = [event async for event in remote.stream(_request(remote, "after", "Still there?"))]
    assert isinstance(after[-1], Failed) and "stopped answering" in after[-1].message
    await remote.shutdown()


def test_compare_says_where_each_path_runs() -> None:
    from backend.chat.compare import path_differences
    from backend.engine.protocol import EngineInfo

    local = EngineInfo("m", 1024, frozenset({"text"}), {"model": "m", "dtype": "float32"})
    remote = EngineInfo("m", 1024, frozenset({"text"}), {"server": "http://gpu:8000", "served_model": "m"})
    (difference,) = path_differences(local, remote)
    assert difference.label() == "optimized on http://gpu:8000, baseline in process"
    assert path_differences(remote, remote) == (), "the same server twice: nothing differs"


def test_acceptance_comes_from_the_servers_counters_moving_during_the_turn() -> None:
    """vLLM's exposition format (the real server's KV line is read in the first test; the tiny
    server does not speculate, so the spec-decode counters are written out here)."""
    from backend.engine.metrics import TurnMetrics
    from backend.engine.remote.server_http import parse_metrics, with_server_gauges

    def reading(drafted: int, accepted: int) -> str:
        return "\n".join(
            [
                "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
                'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
                'vllm:num_requests_running{engine="0",model_name="m"} 1.0',
                f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}.0',
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}.0',
            ]
        )

    before, after = parse_metrics(reading(100, 60)), parse_metrics(reading(140, 90))
    assert after.kv_cache_usage == 0.25 and after.requests_running == 1.0
    metrics = with_server_gauges(TurnMetrics(generated_tokens=50), before, after)
    assert (metrics.drafted_tokens, metrics.accepted_tokens, metrics.kv_cache_usage) == (40, 30, 0.25)
    assert "spec accepted 30/40 (75%)" in metrics.summary_line()
    plain = with_server_gauges(TurnMetrics(), parse_metrics(""), parse_metrics(""))
    assert plain.drafted_tokens is None and plain.kv_cache_usage is None, "no figures, no guesses"
    assert remote_label(
        {"server": "http://gpu:8000", "tensor_parallel_size": 2, "pipeline_parallel_size": 1}
    ) == ("remote: gpu:8000 · TP 2")
    assert remote_label({"server": "http://gpu:8000"}) == "remote: gpu:8000" and remote_label({}) == ""
