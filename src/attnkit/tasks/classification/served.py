"""A classifier checkpoint as the server serves it: labels texts (``POST /v1/classify``); longer
texts are read up to the model's length, as ``attnkit classify`` reads them."""

from __future__ import annotations

from typing import Any

from ...plugin.served import parameter_count
from .classifier import Classifier
from .inputs import input_room


class ClassifierServed:
    task = "classify"

    def __init__(self, name: str, arch: str, classifier: Classifier):
        self.name, self.arch, self.classifier = name, arch, classifier

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str, **engine: Any) -> ClassifierServed:
        """The served model; torch alone decodes it, whatever the server's ``engine`` options say."""
        return cls(name, state["arch"], Classifier.from_state(state, device=device, path=name))

    def count_tokens(self, text: str) -> int:
        return min(
            len(self.classifier.tokenizer.encode(text, side="src")), input_room(self.classifier.model.config)
        )

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function."""
        if op == "classify":
            return lambda items: self.predict(items, **o), None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def predict(self, texts: list[str], *, top_k: int) -> list[list[tuple[str, float]]]:
        return self.classifier.predict(texts, top_k=top_k)

    def release(self) -> None:
        """Free the weights (they decode in another process); the tokenizer and labels stay."""
        self.classifier.model.to("meta")

    def describe(self) -> dict[str, Any]:
        cfg = self.classifier.model.config
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "labels": self.classifier.labels,
            "pooling": cfg.pooling,
            "max_src_tokens": cfg.max_len,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
            "parameters": parameter_count(self.classifier.model),
            "device": str(self.classifier.device),
        }
