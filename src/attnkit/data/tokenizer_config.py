"""The ``tokenizer:`` section of an experiment: the SentencePiece model trained on the training split,
or one given (``model``), and subword sampling. It lives with the tokenizer that reads it."""

from __future__ import annotations

import dataclasses

from ..config import ConfigBase


@dataclasses.dataclass
class TokenizerConfig(ConfigBase):
    """SentencePiece trained on the training split; joint = one vocabulary for both languages."""

    vocab_size: int = 8000
    model_type: str = "unigram"
    joint: bool = True
    character_coverage: float = 1.0
    # Subword regularization (Kudo, 2018), translation training only: each epoch re-segments the
    # training pairs, drawing one of the sample_nbest best segmentations ~ P^sample_alpha
    # (0 = off: the best one always; validation and decoding always use the best one).
    sample_nbest: int = 0
    sample_alpha: float = 0.1
    # SentencePiece trains on a seeded sample of this many sentences (joint: of both sides together)
    max_sentences: int = 2_000_000
    # existing SentencePiece model(s) instead of training one: [PATH] (joint) or [SOURCE, TARGET]
    model: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # one path written without brackets
            self.model = [self.model] if self.model else []
        super().__post_init__()

    def validate(self) -> None:
        self._check(self.vocab_size >= 16, "vocab_size", "must be at least 16")
        self._check(self.max_sentences >= 1000, "max_sentences", "must be at least 1000")
        self._check(
            isinstance(self.model, list)
            and len(self.model) in (0, 1, 2)
            and all(isinstance(p, str) and p for p in self.model),
            "model",
            "must be [PATH] (one joint SentencePiece model) or [SOURCE, TARGET]",
        )
        self._choice("model_type", ("unigram", "bpe"))
        self._check(0.9 <= self.character_coverage <= 1.0, "character_coverage", "must be in [0.9, 1]")
        self._check(
            self.sample_nbest == 0 or 2 <= self.sample_nbest <= 1024,
            "sample_nbest",
            "must be 0 (off) or in [2, 1024]",
        )
        self._check(self.sample_alpha > 0, "sample_alpha", "must be > 0")
        self._check(
            not self.sample_nbest or self.model_type == "unigram",
            "sample_nbest",
            "needs model_type unigram (SentencePiece draws n-best segmentations only from unigram models)",
        )
