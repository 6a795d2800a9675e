"""Continuous batching for translation: sentences join and leave one running beam search.

Joining needs caches that grow and per-sentence start positions, so a stream decodes eagerly, also
for a compiled translator (whose whole batches run through its compiled step)."""

from __future__ import annotations

from collections.abc import Hashable

from torch import nn

from ...data.batching import pad_sequences
from ...decoding.continuous import BeamPool
from ...decoding.options import SearchOptions
from ...errors import ConfigError, DataError
from ...model.transformer import Transformer
from ...positional import ABSOLUTE
from .inputs import check_sentences
from .translator import Translation, Translator


class TranslationStream:
    """Sentences translated by one running beam search (:class:`~attnkit.decoding.continuous.BeamPool`):
    ``add`` starts (tag, text) pairs, ``step`` decodes one token for all of them and returns
    (tag, :class:`Translation`) for those finished. Each result is what ``translate`` gives for the
    sentence alone, with the same options (float rounding aside). Made by :meth:`start`."""

    def __init__(self, translator: Translator, pool: BeamPool, *, prefix: str | None = None):
        if prefix is not None and not isinstance(prefix, str):
            raise DataError(f"a stream's prefix is one str, got {type(prefix).__name__}")
        self.translator, self.pool, self.prefix = translator, pool, prefix
        self.nbest = pool.nbest
        self.src_ids: dict[Hashable, list[int]] = {}

    @classmethod
    def start(
        cls, translator: Translator, options: SearchOptions | None = None, *, prefix: str | None = None
    ) -> TranslationStream:
        """A beam search that sentences join and leave step by step (continuous batching, for a
        server), searching as ``options`` say (as ``Translator.translate``); ``prefix`` (one str)
        starts every sentence of the stream."""
        options = options or SearchOptions()
        if options.sample:
            raise ConfigError("a stream searches: sampling decodes whole batches (Translator.translate)")
        pool = BeamPool(
            translator.model,
            beam_size=options.beam,
            nbest=options.nbest,
            length_penalty=options.length_penalty,
            max_len_a=options.max_len_a,
            max_len_b=options.max_len_b,
            min_len=options.min_length,
            controls=options.controls,
        )
        return cls(translator, pool, prefix=prefix)

    @staticmethod
    def supports(translator: Translator, beam: int) -> bool:
        """Whether the model's decoder state can take sentences mid-decoding, for this beam."""
        model: nn.Module = translator.model  # as a module: its class decides, not the search contract
        return (
            isinstance(model, Transformer)
            and model.config.positional in ABSOLUTE
            and 2 <= beam <= model.config.tgt_vocab_size // 2
        )

    def __len__(self) -> int:
        return len(self.pool)

    def add(self, items: list[tuple[Hashable, str]]) -> list[tuple[Hashable, Translation]]:
        tags, texts = zip(*items) if items else ((), ())
        # the server checks lengths first
        ids, _ = self.translator.encode_sources(check_sentences(list(texts)))
        done = [
            (t, Translation("", 0.0, [("", 0.0)] * self.nbest, [], [], []))
            for t, seq in zip(tags, ids)
            if not seq
        ]
        new = [(t, seq) for t, seq in zip(tags, ids) if seq]
        if new:
            src = pad_sequences([seq for _, seq in new], self.translator.model.config.pad_id)  # (B, S)
            p = self.pool
            ids = [seq for _, seq in new]
            joining = [t for t, _ in new]
            prefix = self.translator.target_prefixes(self.prefix, ids, p.max_len_a, p.max_len_b)
            p.add(src.to(self.translator.device), joining, prefix=prefix)
            self.src_ids.update(new)
        return done

    def step(self) -> list[tuple[Hashable, Translation]]:
        done = self.pool.step()
        return [(tag, self.translator.translation(self.src_ids.pop(tag), hyps)) for tag, hyps in done]
