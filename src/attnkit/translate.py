"""Translate text with a trained model: ``Translator.from_checkpoint(path).translate([...])``.

Sentences are encoded to subwords, sorted by length into batches under a token budget (so little
padding is decoded), searched with greedy or beam search, detokenized, and returned in input order.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from .checkpoint import load_checkpoint, model_from_checkpoint
from .data.tokenizer import SubwordTokenizer
from .decoding import beam_search, greedy_search
from .errors import CheckpointError, ConfigError, DataError
from .fast import packed_linears


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


def resolve_device(name: str = "auto") -> torch.device:
    """ "auto" (a GPU if there is one), "cpu", "cuda" or "cuda:N"."""
    if name != "auto" and name != "cpu" and not re.fullmatch(r"cuda(:\d+)?", name):
        raise ConfigError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CheckpointError(f"device {name!r} asked for, but no CUDA GPU is available")
    return torch.device(name)


class Translator:
    """A model, its tokenizer and a device; stateless between calls."""

    def __init__(self, model: nn.Module, tokenizer: SubwordTokenizer, device: str | torch.device = "cpu"):
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> Translator:
        state = load_checkpoint(path)
        model = model_from_checkpoint(state)
        return cls(model, SubwordTokenizer.from_state_dict(state["tokenizer"]), device)

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
        sentences: list[str],
        *,
        beam: int = 4,
        nbest: int = 1,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        batch_tokens: int = 4000,
        return_attention: bool = False,
    ) -> list[Translation]:
        """Translate ``sentences``; an empty sentence gives an empty translation (counts stay equal)."""
        ids, truncated = self._encode(sentences)
        if truncated:
            warnings.warn(
                f"{truncated} input sentence(s) longer than {self.max_src_len} subword tokens were truncated",
                stacklevel=3,  # past torch.no_grad, at the caller
            )
        results: list[Translation | None] = [None] * len(sentences)
        order = sorted((i for i, seq in enumerate(ids) if seq), key=lambda i: len(ids[i]))
        for i, seq in enumerate(ids):
            if not seq:
                results[i] = Translation("", 0.0, [("", 0.0)] * nbest, [], [], [])
        with packed_linears(self.model):  # weights packed once for all the batches (CPU)
            for batch in _length_batches(order, ids, batch_tokens):
                width = max(len(ids[i]) for i in batch)
                src = torch.full((len(batch), width), self.model.config.pad_id, dtype=torch.long)
                for row, i in enumerate(batch):
                    src[row, : len(ids[i])] = torch.tensor(ids[i])
                src = src.to(self.device)
                limits = dict(max_len_a=max_len_a, max_len_b=max_len_b, return_attention=return_attention)
                if beam == 1 and nbest == 1:
                    found = [[h] for h in greedy_search(self.model, src, **limits)]
                else:
                    found = beam_search(
                        self.model, src, beam_size=beam, nbest=nbest, length_penalty_alpha=length_penalty, **limits
                    )
                for row, i in enumerate(batch):
                    hyps = found[row]
                    best = hyps[0]
                    attention = None
                    if best.attention is not None:
                        attention = best.attention[:, : len(ids[i])].cpu()  # (T + 1, S) without padding
                    results[i] = Translation(
                        text=self.tokenizer.decode(best.tokens, side="tgt"),
                        score=best.score,
                        nbest=[(self.tokenizer.decode(h.tokens, side="tgt"), h.score) for h in hyps],
                        src_pieces=[self.tokenizer.id_to_piece(t, side="src") for t in ids[i]],
                        tgt_pieces=[self.tokenizer.id_to_piece(t, side="tgt") for t in best.tokens] + ["</s>"],
                        tokens=best.tokens,
                        attention=attention,
                    )
        return results  # type: ignore[return-value]


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
        result.src_pieces, result.tgt_pieces, stack(out.cross_attn),
        stack(getattr(enc, "self_attn", None)), stack(out.self_attn),
    )  # fmt: skip


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
