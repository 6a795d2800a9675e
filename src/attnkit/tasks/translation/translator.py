"""Translate text with a trained model: ``Translator.from_checkpoint(path).translate([...])``.

Sentences are encoded to subwords, sorted by length into batches under a token budget (so little
padding is decoded), searched with greedy or beam search, detokenized, and returned in input order.
Several checkpoints with one tokenizer decode as an ensemble: ``Translator.from_checkpoints([a, b])``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from ...checkpoint import load_checkpoint, model_from_checkpoint
from ...data.batching import pad_sequences
from ...data.tokenizer import SubwordTokenizer
from ...decoding import length_limits
from ...decoding.common import Hypothesis
from ...decoding.compiled import CompiledDecoding, refuse_on_cpu
from ...decoding.ensemble import Ensemble
from ...decoding.options import SearchOptions
from ...decoding.pick import search
from ...denormals import denormals_flushed
from ...device import resolve_device
from ...errors import ConfigError, DataError
from ...fast import packed_linears
from ...model.fixed import check_fixed
from ...model.interface import Seq2SeqModel
from ...model.transformer import Transformer
from ...quantize import check_quantize, quantize_int8
from .inputs import check_batch_tokens, check_sentences, length_batches


@dataclass
class Translation:
    """One output sentence; ``nbest`` holds (text, score) pairs best first when more were asked for.

    attention: (target pieces + eos, source pieces) cross-attention, when asked for.
    """

    text: str
    score: float
    nbest: list[tuple[str, float]]
    src_pieces: list[str]
    tgt_pieces: list[str]
    tokens: list[int]  # the best hypothesis' target ids, without eos
    attention: Tensor | None = None


class TranslationEngine(Protocol):
    """What translates text: the torch engine (:class:`Translator`, eager or after ``compile()``) and
    CTranslate2 (:class:`~.ct2_engine.CT2Translator`). Each declares once what it refuses; the
    command line and the server ask that declaration before anything is decoded."""

    name: str

    @staticmethod
    def refuses(options: SearchOptions, *, attention: bool = False) -> str | None:
        """Why this engine cannot decode ``options`` as attnkit's searches do, in one line naming the
        option and the engine; None when it can."""
        ...

    def translate(
        self, sentences: str | list[str], options: SearchOptions | None = None, **keywords: Any
    ) -> list[Translation]:
        """As :meth:`Translator.translate` (``prefix``, ``batch_tokens``, ``return_attention``, fields)."""
        ...


class Translator:
    """A model, its tokenizer and a device; stateless between calls. The torch engine: it decodes
    every option, eagerly or through its compiled step."""

    name = "torch"

    @staticmethod
    def refuses(options: SearchOptions, *, attention: bool = False) -> str | None:
        return None

    def __init__(
        self,
        model: nn.Module,
        tokenizer: SubwordTokenizer,
        device: str | torch.device = "cpu",
        *,
        quantize: str | None = None,
    ):
        """quantize="int8": int8 weights for the linear layers (CPU only, see attnkit.quantize)."""
        assert isinstance(model, Seq2SeqModel), "a translation model: encode, init_state and decode"
        self.device = resolve_device(device)
        check_quantize(quantize, self.device)
        self.model = model.to(self.device).eval()
        self.src_lang: str | None = None  # the training data's source language, where known (from_state)
        self.quantized = quantize == "int8"
        if self.quantized:
            self.model = quantize_int8(self.model)
        self.tokenizer = tokenizer
        self.layout: CompiledDecoding | None = None  # the compiled step, after compile()

    def compile(
        self, *, announce: Callable[[str], None] | None = None, check_only: bool = False, **options
    ) -> Translator:
        """Decode through the model's own step compiled by ``torch.compile`` from now on: on a GPU,
        replayed from CUDA graphs (:mod:`attnkit.decoding.compiled`); the same searches and the same
        translations. A CPU is refused in one line (compiling took longer there than it saved on real
        sentences; CTranslate2 is the fast CPU path). One Transformer with sinusoidal or
        learned positions, not quantized. ``announce`` hears when each new size compiles, and for
        how long. ``check_only``: refuse what cannot compile, compile nothing (a server's front end,
        whose decoding processes hold the device)."""
        model = self.model
        if not isinstance(model, Transformer) or self.quantized:
            raise ConfigError(
                "compiled decoding needs one float Transformer (not an ensemble, an RNN or int8 weights)"
            )
        check_fixed(model.config)
        if check_only:
            return self
        refuse_on_cpu(self.device)
        self.layout = CompiledDecoding(model, announce=announce, **options)
        return self

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, *, device: str = "auto", quantize: str | None = None
    ) -> Translator:
        return cls.from_state(load_checkpoint(path), device=device, quantize=quantize, path=path)

    @classmethod
    def from_checkpoints(
        cls, paths: Sequence[str | Path], *, device: str = "auto", quantize: str | None = None
    ) -> Translator:
        """Checkpoints that share a tokenizer, decoded as one :class:`~attnkit.decoding.ensemble.Ensemble`
        (each model with its own caches); a single path gives the plain model."""
        from ...plugin import expect_task  # the registry imports this module

        if len(paths) == 1:
            return cls.from_checkpoint(paths[0], device=device, quantize=quantize)
        if not paths:
            raise ConfigError("an ensemble needs at least one checkpoint")
        models, tokenizer = [], None
        for path in paths:
            state = load_checkpoint(path)
            expect_task(state, "translate", path)
            tok = SubwordTokenizer.from_state_dict(state["tokenizer"])
            if tokenizer is None:
                tokenizer = tok
            elif tok.fingerprint() != tokenizer.fingerprint():
                raise ConfigError(
                    f"{path} has another tokenizer than {paths[0]}: an ensemble needs checkpoints "
                    "that share one (the same SentencePiece model)"
                )
            models.append(model_from_checkpoint(state))
        assert tokenizer is not None
        return cls(Ensemble(models), tokenizer, device, quantize=quantize)

    @classmethod
    def from_state(
        cls,
        state: dict,
        *,
        device: str = "auto",
        quantize: str | None = None,
        path: str | Path = "checkpoint",
    ) -> Translator:
        """From a checkpoint already loaded with :func:`attnkit.checkpoint.load_checkpoint`."""
        from ...plugin import expect_task  # the registry imports this module

        expect_task(state, "translate", path)
        model = model_from_checkpoint(state)
        made = cls(model, SubwordTokenizer.from_state_dict(state["tokenizer"]), device, quantize=quantize)
        made.src_lang = ((state.get("experiment") or {}).get("data") or {}).get("src_lang")
        return made

    @property
    def max_src_len(self) -> int:
        return int(self.model.config.max_len)

    def encode_sources(self, sentences: list[str]) -> tuple[list[list[int]], int]:
        """Each sentence as source ids, cut to max_len, and how many were cut: every engine's input."""
        ids, truncated = [], 0
        for text in sentences:
            seq = self.tokenizer.encode(text, side="src")
            if len(seq) > self.max_src_len:
                seq, truncated = seq[: self.max_src_len], truncated + 1
            ids.append(seq)
        return ids, truncated

    @torch.no_grad()
    def translate(
        self,
        sentences: str | list[str],
        options: SearchOptions | None = None,
        *,
        prefix: str | Sequence[str] | None = None,
        batch_tokens: int = 4000,
        return_attention: bool = False,
        **fields: Any,
    ) -> list[Translation]:
        """Translate ``sentences`` as ``options`` say (:class:`~attnkit.decoding.SearchOptions`;
        ``fields`` change single options: ``translate(text, beam=1)``); an empty sentence gives an
        empty translation (counts stay equal).

        Each output has at most ``max_len_a`` * source tokens + ``max_len_b`` tokens (eos included,
        and no more than the model's ``max_len`` - 1) and at least ``min_length`` before eos (the
        length limit wins). prefix: each translation's first words, forced (a str: the same for every
        sentence; a sequence: one per sentence, "" for none). ``sample``: draw ``nbest`` samples per
        sentence instead of searching (back-translation), from a generator seeded with ``seed``: the
        same seed and input give the same samples.

        A single ``str`` is one sentence (not a sequence of characters): the result is a list of one.
        Anything else that is not a list of strings, or a string holding undecodable bytes (lone
        surrogates from a non-UTF-8 command line), is a :class:`DataError` naming the item.
        """
        options = SearchOptions.of(options, **fields)
        sentences = check_sentences(sentences)
        check_batch_tokens(batch_tokens)
        ids, truncated = self.encode_sources(sentences)
        prefixes = self.target_prefixes(prefix, ids, options.max_len_a, options.max_len_b)
        if truncated:
            warnings.warn(
                f"{truncated} input sentence(s) longer than {self.max_src_len} subword tokens were truncated",
                stacklevel=3,  # past torch.no_grad, at the caller
            )
        results: list[Translation | None] = [None] * len(sentences)
        order = sorted((i for i, seq in enumerate(ids) if seq), key=lambda i: len(ids[i]))
        generator = torch.Generator(device=self.device).manual_seed(options.seed) if options.sample else None
        for i, seq in enumerate(ids):
            if not seq:
                results[i] = Translation("", 0.0, [("", 0.0)] * options.nbest, [], [], [])
        # Eager searches: weights packed once for all the batches (CPU). A compiled step keeps its own.
        packing = contextlib.nullcontext() if self.layout is not None else packed_linears(self.model)
        with packing, denormals_flushed(self.device.type == "cpu"):
            for batch in length_batches(order, ids, batch_tokens):
                src = pad_sequences([ids[i] for i in batch], self.model.config.pad_id).to(
                    self.device
                )  # (B, S)
                found = search(
                    self.model,
                    src,
                    options,
                    prefix=None if prefixes is None else [prefixes[i] for i in batch],
                    return_attention=return_attention,
                    layout=self.layout,
                    generator=generator,
                )
                for row, i in enumerate(batch):
                    results[i] = self.translation(ids[i], found[row])
        return results  # type: ignore[return-value]

    def target_prefixes(
        self, prefix: str | Sequence[str] | None, ids: list[list[int]], max_len_a: float, max_len_b: int
    ) -> list[list[int]] | None:
        """Each sentence's prefix as target ids (None: no prefix at all); one too long for its
        sentence's length limit is a ConfigError."""
        if prefix is None:
            return None
        texts = [prefix] * len(ids) if isinstance(prefix, str) else check_sentences(prefix, what="prefix")
        if len(texts) != len(ids):
            raise DataError(f"{len(texts)} prefixes for {len(ids)} sentences: give one per sentence")
        out = [self.tokenizer.encode(text, side="tgt") for text in texts]
        for i, tokens in enumerate(out):  # a forced unknown piece would print as "⁇": say which
            if self.tokenizer.unk_id in tokens:
                unk = self.tokenizer.unk_id
                unknown = sorted({c for c in texts[i] if unk in self.tokenizer.encode(c, side="tgt")})
                raise ConfigError(
                    f"the prefix of sentence {i + 1} holds characters the target vocabulary lacks "
                    f"({' '.join(map(repr, unknown[:5])) or 'unknown pieces'}): it cannot be forced"
                )
        src_len = torch.tensor([len(seq) for seq in ids])
        limits = length_limits(src_len, max_len_a, max_len_b, self.max_src_len - 1).tolist()
        for i, (seq, tokens, limit) in enumerate(zip(ids, out, limits, strict=True)):
            if seq and len(tokens) >= limit:
                raise ConfigError(
                    f"the prefix of sentence {i + 1} has {len(tokens)} tokens, but its length limit "
                    f"allows {limit - 1} before eos (max_len_a * {len(seq)} source tokens + max_len_b, "
                    f"at most {self.max_src_len - 2})"
                )
        return out if any(out) else None

    def translation(self, src_ids: list[int], hyps: list[Hypothesis]) -> Translation:
        """The best hypothesis and the n-best list of one sentence as text."""
        best = hyps[0]
        attention = None
        if best.attention is not None:
            attention = best.attention[:, : len(src_ids)].cpu()  # (T + 1, S) without padding
        return Translation(
            text=self.tokenizer.decode(best.tokens, side="tgt"),
            score=best.score,
            nbest=[(self.tokenizer.decode(h.tokens, side="tgt"), h.score) for h in hyps],
            src_pieces=[self.tokenizer.id_to_piece(t, side="src") for t in src_ids],
            tgt_pieces=[self.tokenizer.id_to_piece(t, side="tgt") for t in best.tokens] + ["</s>"],
            tokens=best.tokens,
            attention=attention,
        )
