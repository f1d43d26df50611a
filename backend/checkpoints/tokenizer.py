"""A byte-level tokenizer carrying every Gemma 4 special token, for generated checkpoints.

Ids 0.. are Gemma 4's special tokens (in the order of ``SPECIAL_TOKENS``), then the 256
byte symbols, then ``<unused_N>`` fillers up to the requested vocabulary size, so every
id a model can emit decodes to something. ``<bos>`` is added on encode, as Gemma's own
tokenizer does; the chat template writes it too (chat prompts are encoded without it).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SPECIAL_TOKENS: tuple[str, ...] = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<mask>",
    "<|turn>",
    "<turn|>",
    "<|image>",
    "<image|>",
    "<|image|>",
    "<|audio>",
    "<audio|>",
    "<|audio|>",
    "<|video|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    "<|tool>",
    "<tool|>",
    "<|channel>",
    "<channel|>",
    "<|think|>",
    '<|"|>',
)
TOKEN_ID = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
# Named attributes that transformers' Gemma4Processor and vLLM read from the tokenizer.
NAMED_TOKENS = {
    "bos_token": "<bos>",
    "eos_token": "<eos>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
    "video_token": "<|video|>",
    "sot_token": "<|turn>",
    "eot_token": "<turn|>",
}
# Generation ends on <eos>, <turn|> and <|tool_response> (a tool call ends the model's turn).
STOP_TOKEN_IDS = (TOKEN_ID["<eos>"], TOKEN_ID["<turn|>"], TOKEN_ID["<|tool_response>"])
MIN_VOCAB = len(SPECIAL_TOKENS) + 256


def chat_template() -> str:
    return resources.files("backend.checkpoints").joinpath("chat_template.jinja").read_text()


def write_tokenizer(out_dir: Path, vocab_size: int, model_max_length: int) -> None:
    """Write tokenizer.json, tokenizer_config.json and chat_template.jinja into ``out_dir``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if vocab_size < MIN_VOCAB:
        raise ValueError(f"vocab_size must be at least {MIN_VOCAB} (specials + 256 bytes), got {vocab_size}")
    vocab = dict(TOKEN_ID)
    symbols = byte_symbols()
    if set(symbols) != set(pre_tokenizers.ByteLevel.alphabet()):
        raise RuntimeError("tokenizers' byte-level alphabet is not GPT-2's: update byte_symbols()")
    for symbol in symbols:
        vocab[symbol] = len(vocab)
    for filler in range(vocab_size - len(vocab)):
        vocab[f"<unused_{filler}>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    save_tokenizer(tokenizer, out_dir, model_max_length)


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path, model_max_length: int) -> None:
    """Write ``tokenizer`` (special tokens at Gemma 4's ids) with its config and the chat template."""
    from tokenizers import processors

    for token, index in TOKEN_ID.items():
        if tokenizer.token_to_id(token) != index:
            raise ValueError(
                f"special token {token} must have id {index}, has {tokenizer.token_to_id(token)}"
            )
    bos = TOKEN_ID["<bos>"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos)]
    )
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "padding_side": "left",
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        **NAMED_TOKENS,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (out_dir / "chat_template.jinja").write_text(chat_template())


def byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode symbols, in byte order (byte b is ``byte_symbols()[b]``)."""
    printable = list(range(ord("!"), ord("~") + 1))
    printable += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    symbol = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in symbol:
            symbol[byte] = chr(256 + extra)
            extra += 1
    return [symbol[byte] for byte in range(256)]
