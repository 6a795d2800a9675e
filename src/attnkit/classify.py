"""Use a trained classifier: label texts, score them against gold labels, show which words decided.

    clf = Classifier.from_checkpoint("runs/langid/best.pt")
    clf.predict(["Ein Hund rennt ."], top_k=2)     # [[("de", 0.99), ("en", 0.004)]]
    clf.word_weights("Ein Hund rennt .")           # (words, weights): the review picture's data

The checkpoint stores the label names (``labels``, in class-id order) beside the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_checkpoint, model_from_checkpoint
from .data.readers import LabelledExample
from .data.tokenizer import SubwordTokenizer
from .errors import CheckpointError, ConfigError, DataError
from .highlight import merge_subwords
from .task_metrics import ClassificationReport, classification_report
from .translate import resolve_device

Text = str | tuple[str, str]  # one text, or a (text_a, text_b) pair


def example_text(example: LabelledExample) -> Text:
    """The classifier's input of a labelled example: its text, or its (text_a, text_b) pair."""
    return example.text if example.text_b is None else (example.text, example.text_b)


def classifier_pieces(tokenizer: SubwordTokenizer, text: Text) -> list[int]:
    """A text's pieces; a pair is text_a's pieces, eos, text_b's pieces (training encodes the same way)."""
    if isinstance(text, tuple):
        a, b = text
        return [*tokenizer.encode(a, side="src"), tokenizer.eos_id, *tokenizer.encode(b, side="src")]
    return tokenizer.encode(text, side="src")


@dataclass
class WordWeights:
    label: str
    probability: float
    words: list[str]
    weights: list[float]


class Classifier:
    """An encoder classifier, its tokenizer, its label names and a device; stateless between calls."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: SubwordTokenizer,
        labels: list[str],
        device: str | torch.device = "cpu",
    ):
        if len(labels) != model.config.n_classes:
            raise CheckpointError(
                f"{len(labels)} label names for a model of {model.config.n_classes} classes"
            )
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.labels = [str(x) for x in labels]

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> Classifier:
        return cls.from_state(load_checkpoint(path), device=device, path=path)

    @classmethod
    def from_state(cls, state: dict, *, device: str = "auto", path: str | Path = "checkpoint") -> Classifier:
        """From a loaded checkpoint (:func:`attnkit.checkpoint.load_checkpoint`)."""
        if state["arch"] != "classifier":
            raise CheckpointError(
                f"{path} holds a {state['arch']!r} model, not a classifier (arch classifier)"
            )
        if not isinstance(state.get("labels"), list):
            raise CheckpointError(f"{path}: classifier checkpoint lacks its label names")
        return cls(
            model_from_checkpoint(state),
            SubwordTokenizer.from_state_dict(state["tokenizer"]),
            state["labels"],
            device,
        )

    def _encode(self, texts: list[Text]) -> list[list[int]]:
        room = self.model.config.max_len - (1 if self.model.config.pooling == "first" else 0)
        ids = []
        for n, text in enumerate(texts, start=1):
            seq = classifier_pieces(self.tokenizer, text)[:room]
            if not seq or (isinstance(text, str) and not text.strip()):
                raise DataError(f"input line {n} is empty: nothing to classify")
            ids.append(seq)
        return ids

    @torch.no_grad()
    def probabilities(self, texts: list[Text], *, batch_size: int = 128) -> torch.Tensor:
        """Class probabilities (N, C) in input order."""
        ids = self._encode(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # little padding per batch
        probs = torch.empty(len(ids), len(self.labels))
        pad = self.model.config.pad_id
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            T = max(len(ids[i]) for i in rows)
            x = torch.full((len(rows), T), pad, dtype=torch.long)
            for r, i in enumerate(rows):
                x[r, : len(ids[i])] = torch.tensor(ids[i])
            probs[rows] = self.model(x.to(self.device)).float().softmax(-1).cpu()
        return probs

    def predict(self, texts: list[Text], *, top_k: int = 1) -> list[list[tuple[str, float]]]:
        """For each text its ``top_k`` (label, probability) pairs, most probable first."""
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

    def evaluate(self, examples: list[LabelledExample]) -> ClassificationReport:
        """Accuracy, macro-F1 and per-class scores on labelled examples (read with
        :func:`attnkit.data.readers.read_labelled`, or a corpus spec)."""
        texts, gold = [example_text(e) for e in examples], [e.label for e in examples]
        if not examples:
            raise DataError("nothing to evaluate: no labelled examples")
        index = {label: c for c, label in enumerate(self.labels)}
        unknown = sorted(set(gold) - set(index))
        if unknown:
            raise DataError(
                f"label(s) the model does not know: {', '.join(unknown[:5])} "
                f"(known: {', '.join(self.labels)})"
            )
        predicted = self.probabilities(texts).argmax(-1).tolist()
        return classification_report([index[g] for g in gold], predicted, self.labels)

    @torch.no_grad()
    def word_weights(self, text: str) -> WordWeights:
        """The predicted label and each word's pooling weight (subwords merged, weights summed)."""
        ids = self._encode([text])[0]
        out = self.model.classify(torch.tensor([ids], device=self.device), need_weights=True)
        probs = out.logits.float().softmax(-1)[0]
        c = int(probs.argmax())
        pieces = [self.tokenizer.id_to_piece(i, side="src") for i in ids]
        words, weights = merge_subwords(pieces, out.token_weights[0].tolist())
        return WordWeights(self.labels[c], float(probs[c]), words, weights)

    @torch.no_grad()
    def self_attention(self, text: str) -> tuple[list[str], torch.Tensor]:
        """Pieces (with the CLS token of ``first`` pooling) and the encoder self-attention (L, H, T, T)."""
        ids = self._encode([text])[0]
        out = self.model.classify(torch.tensor([ids], device=self.device), need_weights=True)
        pieces = [self.tokenizer.id_to_piece(i, side="src") for i in ids]
        if self.model.config.pooling == "first":
            pieces = ["<cls>", *pieces]
        return pieces, torch.stack([w[0] for w in out.self_attn]).cpu()
