"""Run by tests/compat/test_centroid_drafts.py in a fresh interpreter, as a user's app would start: the
baseline and the optimized path (MTP with a centroid-masked drafter) on one generated checkpoint,
greedy, the same prompts; prints their tokens and drafts as JSON. Usage: MODEL_DIR LOG_DIR."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

from backend.compat.speculation import centroid_drafts
from backend.config.settings import EngineSettings
from backend.engine.local.log import capture_stderr
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import resolve
from backend.engine.paths.engine_args import Argument, EnginePath, engine_config
from backend.engine.protocol import EngineRequest, Finished, SamplingSettings
from backend.gemma4.messages import ChatMessage, PromptRenderer

PROMPTS = ("Hello there", "Count to twenty.", "Name three rivers.")
SETTINGS = EngineSettings(dtype="float32", max_model_len=1024, kv_cache_gib=1, speculation="mtp")


async def main(model: str, log_dir: Path) -> dict[str, object]:
    source = resolve(model)
    renderer = PromptRenderer.for_model(str(source.path))
    eager = Argument(True, "tests: a quicker start; both engines alike")
    found: dict[str, object] = {}
    for path in (EnginePath.baseline(), EnginePath.optimized()):
        config = engine_config(path, source, SETTINGS)
        config = replace(config, args={**config.args, "enforce_eager": eager})
        log = log_dir / f"centroid-{path.name}.log"
        engine = VllmEngine(source, config, log_path=log)
        with capture_stderr(log):
            await engine.start()
        tokens, drafted = [], 0
        try:
            for i, text in enumerate(PROMPTS):
                prompt = renderer.render([ChatMessage("user", text)]).text
                sampling = SamplingSettings(max_tokens=24, ignore_eos=True)
                final = [
                    event async for event in engine.stream(EngineRequest(f"c{i}", prompt, sampling=sampling))
                ][-1]
                assert isinstance(final, Finished), final
                tokens.append(list(final.token_ids))
                drafted += final.metrics.drafted_tokens or 0
        finally:
            await engine.shutdown()
        found[path.name] = {
            "tokens": tokens,
            "drafted": drafted,
            "speculative": "speculative_config" in config.args,
            "patched": centroid_drafts.IN_USE in log.read_text(),
        }
    return found


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], Path(sys.argv[2])))))
