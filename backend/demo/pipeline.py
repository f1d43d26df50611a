"""``train_demo``: corpus → tokenizer → model → drafter → a checkpoint directory with its manifest.

Work in progress lives in ``OUT/work`` (the tokenizer, the token streams, each phase's
resumable state), so running the same command again carries on where it stopped. The
finished checkpoint is ``OUT/model`` + ``OUT/drafter`` in bf16 and ``OUT/gemma-chat-checkpoint.json``,
the manifest: corpus, seed, steps, tokens seen, losses, drafter agreement, package
versions and the command that reproduces it.
"""

from __future__ import annotations

import json
import platform
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.checkpoints.sizes import DEMO
from backend.demo.corpus import Corpus, file_turns, split_corpus, stdlib_root
from backend.demo.schedule import Budget, ProgressFn
from backend.demo.training import PhaseConfig
from backend.provenance import package_versions

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

GENERATOR = "gemma-chat train-demo"
MODEL_LR, DRAFTER_LR = 3e-3, 3e-3
TOKEN_STREAMS = "tokens-v2.npz"  # v2: each turn's prompt and answer tokenized apart


@dataclass(frozen=True)
class DemoPlan:
    """What to train and for how long; ``limit_files``/``max_steps`` shrink it for tests."""

    out: Path
    minutes: float = 45.0
    drafter_minutes: float = 15.0
    seed: int = 0
    seq_len: int = 256
    batch_size: int = 8
    limit_files: int | None = None
    max_steps: int | None = None

    def command(self) -> str:
        words = ["gemma-chat", "train-demo", str(self.out), "--minutes", f"{self.minutes:g}"]
        words += ["--drafter-minutes", f"{self.drafter_minutes:g}", "--seed", str(self.seed)]
        return shlex.join(words)

    def phase(self, name: str, minutes: float, lr: float) -> PhaseConfig:
        return PhaseConfig(
            name=name,
            budget=Budget(seconds=minutes * 60, lr=lr),
            seed=self.seed,
            seq_len=self.seq_len,
            batch_size=self.batch_size,
            eval_every_s=max(30.0, minutes * 60 / 10),
            checkpoint_every_s=120.0,
            max_steps=self.max_steps,
        )


def train_demo(plan: DemoPlan, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Run every stage (resuming finished or interrupted ones) and return the manifest."""
    from transformers import Gemma4TextConfig

    from backend.checkpoints.writer import drafter_config, text_config_kwargs
    from backend.demo.distill import distill_drafter, drafter_model
    from backend.demo.train_lm import text_model, train_lm

    started = time.monotonic()
    work = plan.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    corpus = split_corpus(stdlib_root(), plan.seed, plan.limit_files)
    tokenizer, train, held_out = _tokens(corpus, work)

    model = text_model(Gemma4TextConfig(**text_config_kwargs(DEMO.text)), plan.seed)
    lm_run = train_lm(
        model, train, held_out, plan.phase("model", plan.minutes, MODEL_LR), work / "model_state.pt", progress
    )
    drafter = drafter_model(drafter_config(DEMO), plan.seed + 1)
    draft_run = distill_drafter(
        model,
        drafter,
        train,
        held_out,
        plan.phase("drafter", plan.drafter_minutes, DRAFTER_LR),
        work / "drafter_state.pt",
        progress,
    )
    manifest = {
        "generator": GENERATOR,
        "size": DEMO.name,
        "seed": plan.seed,
        "command": plan.command(),
        "tool_calling": False,  # trained on code only: the app leaves tool declarations out of its prompts
        "corpus": {
            "source": f"Python {platform.python_version()} standard library ({corpus.root}), no test folders",
            "train_files": len(corpus.train_files),
            "held_out_files": len(corpus.held_out_files),
            "train_tokens": int(len(train)),
            "held_out_tokens": int(len(held_out)),
            "tokenizer": f"byte-level BPE, {tokenizer.get_vocab_size()} tokens, Gemma 4 special tokens",
        },
        "model": _phase_summary(lm_run, plan.minutes, MODEL_LR, "held_out_loss_nats_per_token"),
        "drafter": _phase_summary(draft_run, plan.drafter_minutes, DRAFTER_LR, "held_out_top1_agreement"),
        "packages": package_versions(),
        "wall_minutes": round((time.monotonic() - started) / 60, 1),
    }
    _export(plan.out, model, drafter, tokenizer, manifest)
    return manifest


def _tokens(corpus: Corpus, work: Path) -> tuple[Tokenizer, np.ndarray, np.ndarray]:
    """The tokenizer and both token streams, made once and kept in ``work``."""
    import numpy as np
    from tokenizers import Tokenizer

    from backend.demo.bpe import train_bpe

    train_turns = [turn for path in corpus.train_files for turn in file_turns(path)]
    held_turns = [turn for path in corpus.held_out_files for turn in file_turns(path)]
    tok_path, streams = work / "tokenizer.json", work / TOKEN_STREAMS
    if tok_path.is_file():
        tokenizer = Tokenizer.from_file(str(tok_path))
    else:
        tokenizer = train_bpe(prompt + answer for prompt, answer in train_turns)
        tokenizer.save(str(tok_path))
    if streams.is_file():
        saved = np.load(streams)
        return tokenizer, saved["train"], saved["held_out"]

    def encode(turns: list[tuple[str, str]]) -> np.ndarray:
        halves = [half for turn in turns for half in turn]  # each half alone: see corpus.chat_turn
        ids = [e.ids for e in tokenizer.encode_batch(halves, add_special_tokens=False)]
        return np.fromiter((i for row in ids for i in row), dtype=np.int32)

    train, held_out = encode(train_turns), encode(held_turns)
    np.savez(streams, train=train, held_out=held_out)
    return tokenizer, train, held_out


def _phase_summary(run: Any, minutes: float, lr: float, held_name: str) -> dict[str, Any]:
    return {
        "budget_minutes": minutes,
        "learning_rate": lr,
        "steps": run.steps,
        "tokens_seen": run.tokens,
        "minutes": round(run.elapsed_s / 60, 2),
        "train_loss": round(run.train_loss, 4),
        held_name: round(run.held_out, 4),
        "history": run.history,
    }


def _export(out: Path, text_lm: Any, drafter: Any, tokenizer: Tokenizer, manifest: dict[str, Any]) -> None:
    """The trained text stack inside a ``Gemma4ForConditionalGeneration`` (small random towers), in bf16."""
    import torch
    from transformers import Gemma4ForConditionalGeneration

    from backend.checkpoints.tokenizer import save_tokenizer
    from backend.checkpoints.writer import model_config, save_checkpoint

    torch.manual_seed(manifest["seed"])
    full = Gemma4ForConditionalGeneration(model_config(DEMO))
    full.model.language_model.load_state_dict(text_lm.model.state_dict())
    dtype = getattr(torch, DEMO.dtype)

    def write_tokenizer(directory: Path) -> None:
        save_tokenizer(tokenizer, directory, DEMO.text.max_position_embeddings)

    save_checkpoint(out, full.to(dtype).eval(), drafter.to(dtype).eval(), write_tokenizer, manifest)


def read_manifest(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / "gemma-chat-checkpoint.json").read_text()))
