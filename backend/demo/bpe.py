"""A byte-level BPE tokenizer trained on the demo corpus, carrying Gemma 4's special tokens.

The special tokens take ids 0.. in ``SPECIAL_TOKENS`` order (so the checkpoint's config ids
are the generated fixtures' ones), then the 256 byte symbols, then the learned merges.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from backend.checkpoints.tokenizer import SPECIAL_TOKENS

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEMO_VOCAB = 8192


def train_bpe(texts: Iterable[str], vocab_size: int = DEMO_VOCAB) -> Tokenizer:
    """Learn ``vocab_size`` byte-level BPE tokens from ``texts`` (special tokens kept whole)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.add_special_tokens(specials)
    return tokenizer
