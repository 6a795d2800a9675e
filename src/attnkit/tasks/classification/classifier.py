"""Use a trained classifier: label texts, score them against gold labels, show which words decided.

    clf = Classifier.from_checkpoint("runs/multi30k_langid/checkpoint_best.pt")
    clf.predict(["Ein Hund rennt ."], top_k=2)     # [[("de", 0.99), ("en", 0.004)]]
    clf.word_weights("Ein Hund rennt .")           # (words, weights): the review picture's data

The checkpoint stores the label names (``labels``, in class-id order) beside the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...checkpoint import load_checkpoint, model_from_checkpoint
from ...data.batching import pad_sequences
from ...data.readers import LabelledExample
from ...data.tokenizer import SubwordTokenizer
from ...device import resolve_device
from ...errors import CheckpointError, ConfigError
from ...model.classifier import TransformerClassifier
from ...plugin.served import ServedWrapper, as_list
from .highlight import merge_subwords
from .inputs import Text, encode_inputs, input_room
from .scoring import ClassificationReport, evaluate_examples


@dataclass
class WordWeights:
    label: str
    probability: float
    words: list[str]
    weights: list[float]


class Classifier(ServedWrapper):
    """An encoder classifier, its tokenizer, its label names and a device; stateless between calls.
    The server serves this object itself (:meth:`serve`: ``POST /v1/classify``; longer texts are read
    up to the model's length, as ``attnkit classify`` reads them)."""

    task = "classify"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: SubwordTokenizer,
        labels: list[str],
        device: str | torch.device = "cpu",
    ):
        assert isinstance(model, TransformerClassifier), "the task's one arch, classifier"
        if len(labels) != model.config.n_classes:
            raise CheckpointError(
                f"{len(labels)} label names for a model of {model.config.n_classes} classes"
            )
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.labels = [str(x) for x in labels]
        self.name, self.arch = self.task, ""  # the server's name for it and the arch: serve() sets them

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> Classifier:
        return cls.from_state(load_checkpoint(path), device=device, path=path)

    @classmethod
    def from_state(cls, state: dict, *, device: str = "auto", path: str | Path = "checkpoint") -> Classifier:
        """From a loaded checkpoint (:func:`attnkit.checkpoint.load_checkpoint`)."""
        from ...plugin import expect_task  # the registry imports this module

        expect_task(state, "classify", path)
        if not isinstance(state.get("labels"), list):
            raise CheckpointError(f"{path}: classifier checkpoint lacks its label names")
        return cls(
            model_from_checkpoint(state),
            SubwordTokenizer.from_state_dict(state["tokenizer"]),
            state["labels"],
            device,
        )

    def _encode(self, texts: Sequence[Text]) -> list[list[int]]:
        return encode_inputs(self.tokenizer, self.model.config, texts)

    @torch.no_grad()
    def probabilities(self, texts: Text | Sequence[Text], *, batch_size: int = 128) -> torch.Tensor:
        """Class probabilities (N, C) in input order (one str, or one (a, b) pair, is one text)."""
        ids = self._encode(as_list(texts, (str, tuple)))
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # little padding per batch
        probs = torch.empty(len(ids), len(self.labels))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            x = pad_sequences([ids[i] for i in rows], self.model.config.pad_id)  # (B, T)
            probs[rows] = self.model(x.to(self.device)).float().softmax(-1).cpu()
        return probs

    def predict(self, texts: Text | Sequence[Text], *, top_k: int = 1) -> list[list[tuple[str, float]]]:
        """For each text (one str, or one (a, b) pair, is one text) its ``top_k`` (label,
        probability) pairs, most probable first."""
        texts = as_list(texts, (str, tuple))
        if not 1 <= top_k <= len(self.labels):
            raise ConfigError(
                f"top_k must be between 1 and {len(self.labels)} (the number of labels), got {top_k}"
            )
        if not texts:
            return []
        p, idx = self.probabilities(texts).topk(top_k, dim=-1)
        return [
            [(self.labels[c], float(q)) for q, c in zip(pr, ix, strict=True)]
            for pr, ix in zip(p.tolist(), idx.tolist(), strict=True)
        ]

    def evaluate(self, examples: list[LabelledExample], *, batch_tokens: int = 8000) -> ClassificationReport:
        """Accuracy, macro-F1 and per-class scores on labelled examples (read with
        :func:`attnkit.data.readers.read_labelled`, or a corpus spec): :func:`.scoring.evaluate_examples`,
        the function the trainer's validation calls."""
        return evaluate_examples(
            self.model, self.tokenizer, self.labels, examples, self.device, batch_tokens=batch_tokens
        )[1]

    @torch.no_grad()
    def word_weights(self, text: str, method: str = "raw") -> WordWeights:
        """The predicted label and each word's pooling weight (subwords merged, weights summed);
        ``rollout`` or ``flow``: the pooling followed down through the encoder's layers to the input
        words (:mod:`attnkit.attention.rollout`), so a word counts for what the positions pooled read."""
        from ...attention.rollout import mixing

        ids = self._encode([text])[0]
        out = self.model.classify(torch.tensor([ids], device=self.device), need_weights=True)
        probs = out.logits.float().softmax(-1)[0]
        c = int(probs.argmax())
        pieces = [self.tokenizer.id_to_piece(i, side="src") for i in ids]
        assert out.token_weights is not None and out.self_attn is not None  # asked for
        pooled = out.token_weights[0].float()  # (T,)
        if method != "raw":
            mixed = mixing(torch.stack([w[0] for w in out.self_attn]), method)  # (T', T')
            if self.model.config.pooling == "first":  # the CLS token's own mix, CLS itself left out
                pooled = mixed[0, 1:] / mixed[0, 1:].sum()
            else:
                pooled = pooled @ mixed.to(pooled.device)  # (T,) @ (T, T)
        words, weights = merge_subwords(pieces, pooled.tolist())
        return WordWeights(self.labels[c], float(probs[c]), words, weights)

    @torch.no_grad()
    def self_attention(self, text: str) -> tuple[list[str], torch.Tensor]:
        """Pieces (with the CLS token of ``first`` pooling) and the encoder self-attention (L, H, T, T)."""
        ids = self._encode([text])[0]
        out = self.model.classify(torch.tensor([ids], device=self.device), need_weights=True)
        pieces = [self.tokenizer.id_to_piece(i, side="src") for i in ids]
        if self.model.config.pooling == "first":
            pieces = ["<cls>", *pieces]
        assert out.self_attn is not None  # asked for
        return pieces, torch.stack([w[0] for w in out.self_attn]).cpu()

    # -- served (attnkit.plugin.served.ServedModel) ------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return min(len(self.tokenizer.encode(text, side="src")), input_room(self.model.config))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function."""
        if op == "classify":
            return lambda items: self.predict(items, **o), None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def details(self) -> dict[str, Any]:
        cfg = self.model.config
        return {
            "labels": self.labels,
            "pooling": cfg.pooling,
            "max_src_tokens": cfg.max_len,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
        }
