"""Translate text with a trained model: ``Translator.from_checkpoint(path).translate([...])``.

Sentences are encoded to subwords, sorted by length into batches under a token budget (so little
padding is decoded), searched with greedy or beam search, detokenized, and returned in input order.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ...checkpoint import load_checkpoint, model_from_checkpoint
from ...data.batching import pad_sequences
from ...data.tokenizer import SubwordTokenizer
from ...decoding import beam_search, check_nbest, greedy_search
from ...decoding.common import Hypothesis
from ...decoding.continuous import BeamPool
from ...decoding.sampling import SamplingConfig, sample_search
from ...device import resolve_device
from ...errors import ConfigError, DataError
from ...fast import packed_linears
from ...model.interface import Seq2SeqModel
from ...model.transformer import Transformer
from ...positional import ABSOLUTE
from ...quantize import check_quantize, quantize_int8


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


class Translator:
    """A model, its tokenizer and a device; stateless between calls."""

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
        if quantize == "int8":
            self.model = quantize_int8(self.model)
        self.tokenizer = tokenizer

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, *, device: str = "auto", quantize: str | None = None
    ) -> Translator:
        return cls.from_state(load_checkpoint(path), device=device, quantize=quantize, path=path)

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
        from .. import expect_task  # the registry imports this module

        expect_task(state, "translate", path)
        model = model_from_checkpoint(state)
        return cls(model, SubwordTokenizer.from_state_dict(state["tokenizer"]), device, quantize=quantize)

    @property
    def max_src_len(self) -> int:
        return int(self.model.config.max_len)

    def _encode(self, sentences: list[str]) -> tuple[list[list[int]], int]:
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
        *,
        beam: int = 4,
        nbest: int = 1,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        batch_tokens: int = 4000,
        return_attention: bool = False,
        sampling: SamplingConfig | None = None,
        seed: int = 0,
    ) -> list[Translation]:
        """Translate ``sentences``; an empty sentence gives an empty translation (counts stay equal).

        sampling: draw ``nbest`` samples per sentence instead of searching (back-translation), from a
        generator seeded with ``seed``: the same seed and input give the same samples.

        A single ``str`` is one sentence (not a sequence of characters): the result is a list of one.
        Anything else that is not a list of strings, or a string holding undecodable bytes (lone
        surrogates from a non-UTF-8 command line), is a :class:`DataError` naming the item.
        """
        sentences = _check_sentences(sentences)
        _check_search(beam, nbest, length_penalty, batch_tokens, searching=sampling is None)
        ids, truncated = self._encode(sentences)
        if truncated:
            warnings.warn(
                f"{truncated} input sentence(s) longer than {self.max_src_len} subword tokens were truncated",
                stacklevel=3,  # past torch.no_grad, at the caller
            )
        results: list[Translation | None] = [None] * len(sentences)
        order = sorted((i for i, seq in enumerate(ids) if seq), key=lambda i: len(ids[i]))
        generator = torch.Generator(device=self.device).manual_seed(seed) if sampling is not None else None
        for i, seq in enumerate(ids):
            if not seq:
                results[i] = Translation("", 0.0, [("", 0.0)] * nbest, [], [], [])
        with packed_linears(self.model):  # weights packed once for all the batches (CPU)
            for batch in _length_batches(order, ids, batch_tokens):
                src = pad_sequences([ids[i] for i in batch], self.model.config.pad_id).to(
                    self.device
                )  # (B, S)
                if sampling is not None:
                    found = sample_search(
                        self.model,
                        src,
                        temperature=sampling.temperature,
                        top_k=sampling.top_k,
                        top_p=sampling.top_p,
                        num_samples=nbest,
                        generator=generator,
                        max_len_a=max_len_a,
                        max_len_b=max_len_b,
                    )
                elif beam == 1 and nbest == 1:
                    found = [
                        [h]
                        for h in greedy_search(
                            self.model,
                            src,
                            max_len_a=max_len_a,
                            max_len_b=max_len_b,
                            return_attention=return_attention,
                        )
                    ]
                else:
                    found = beam_search(
                        self.model,
                        src,
                        beam_size=beam,
                        nbest=nbest,
                        length_penalty_alpha=length_penalty,
                        max_len_a=max_len_a,
                        max_len_b=max_len_b,
                        return_attention=return_attention,
                    )
                for row, i in enumerate(batch):
                    results[i] = self._translation(ids[i], found[row])
        return results  # type: ignore[return-value]

    def _translation(self, src_ids: list[int], hyps: list[Hypothesis]) -> Translation:
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

    def stream(self, *, beam: int = 4, nbest: int = 1, length_penalty: float = 0.6) -> TranslationStream:
        """Beam search that sentences join and leave step by step (continuous batching, for a
        server): see :class:`TranslationStream`."""
        return TranslationStream(self, beam=beam, nbest=nbest, length_penalty=length_penalty)


class TranslationStream:
    """Sentences translated by one running beam search (:class:`~attnkit.decoding.continuous.BeamPool`):
    ``add`` starts (tag, text) pairs, ``step`` decodes one token for all of them and returns
    (tag, :class:`Translation`) for those finished. Each result is what ``translate`` gives for the
    sentence alone, with the same options (float rounding aside)."""

    def __init__(self, translator: Translator, *, beam: int, nbest: int, length_penalty: float):
        _check_search(beam, nbest, length_penalty, 1, searching=True)
        self.translator = translator
        self.pool = BeamPool(
            translator.model, beam_size=beam, nbest=nbest, length_penalty_alpha=length_penalty
        )
        self.nbest = nbest
        self.src_ids: dict[Hashable, list[int]] = {}

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
        ids, _ = self.translator._encode(_check_sentences(list(texts)))  # the server checks lengths first
        done = [
            (t, Translation("", 0.0, [("", 0.0)] * self.nbest, [], [], []))
            for t, seq in zip(tags, ids)
            if not seq
        ]
        new = [(t, seq) for t, seq in zip(tags, ids) if seq]
        if new:
            src = pad_sequences([seq for _, seq in new], self.translator.model.config.pad_id)  # (B, S)
            self.src_ids.update(new)
            self.pool.add(src.to(self.translator.device), [t for t, _ in new])
        return done

    def step(self) -> list[tuple[Hashable, Translation]]:
        return [
            (tag, self.translator._translation(self.src_ids.pop(tag), hyps)) for tag, hyps in self.pool.step()
        ]


@dataclass
class AttentionMaps:
    """Every attention of one translation, per layer and head, for plotting.

    cross (L, H, T, S); encoder_self (L, H, S, S) and decoder_self (L, H, T, T), where the model has them.
    T counts the target pieces plus the final eos.
    """

    src_pieces: list[str]
    tgt_pieces: list[str]
    cross: Tensor
    encoder_self: Tensor | None
    decoder_self: Tensor | None


def attention_maps(translator: Translator, text: str, *, beam: int = 4) -> AttentionMaps:
    """Translate ``text``, then re-run the model on its own output with the weights returned."""
    (result,) = translator.translate([text], beam=beam)
    if not result.src_pieces:
        raise DataError("the text to translate is empty")
    tok, model = translator.tokenizer, translator.model
    src_ids = tok.encode(text, side="src")[: translator.max_src_len]
    src = torch.tensor([src_ids], device=translator.device)
    tgt_in = torch.tensor([[tok.bos_id, *result.tokens]], device=translator.device)  # (1, T)
    with torch.no_grad():
        enc = model.encode(src, need_weights=True)
        out = model.decode(tgt_in, model.init_state(enc), need_weights=True)

    def stack(ws):
        return None if not ws or ws[0] is None else torch.stack([w[0] for w in ws]).float().cpu()

    return AttentionMaps(
        result.src_pieces,
        result.tgt_pieces,
        stack(out.cross_attn),
        stack(getattr(enc, "self_attn", None)),
        stack(out.self_attn),
    )


def _check_sentences(sentences) -> list[str]:
    if isinstance(sentences, str):
        return [sentences]
    if isinstance(sentences, (bytes, bytearray)) or not hasattr(sentences, "__iter__"):
        raise DataError(f"translate() takes a str or a list of str, got {type(sentences).__name__}")
    sentences = list(sentences)
    for i, text in enumerate(sentences):
        if not isinstance(text, str):
            raise DataError(f"sentence {i} is a {type(text).__name__}, not a str")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DataError(
                f"sentence {i} is not valid text: undecodable character {text[e.start]!r} at "
                f"position {e.start} (was the input UTF-8?)"
            ) from None
    return sentences


def _check_search(
    beam: int, nbest: int, length_penalty: float, batch_tokens: int, *, searching: bool
) -> None:
    for name, value in (("beam", beam), ("nbest", nbest), ("batch_tokens", batch_tokens)):
        try:
            positive = not isinstance(value, bool) and operator.index(value) >= 1
        except TypeError:
            positive = False
        if not positive:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if searching:  # sampling draws nbest samples whatever the beam
        check_nbest(beam, nbest)
    if not math.isfinite(length_penalty):
        raise ConfigError(f"length_penalty must be a finite number, got {length_penalty!r}")


def _length_batches(order: list[int], ids: list[list[int]], batch_tokens: int):
    """Consecutive runs of the length-sorted ``order`` whose padded size stays under the budget."""
    batch: list[int] = []
    for i in order:
        width = len(ids[i])  # sorted by length: the newest is the longest
        if batch and width * (len(batch) + 1) > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
