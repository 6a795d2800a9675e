"""The inference wrapper: reverse sequences with a trained checkpoint (greedy search)."""

from __future__ import annotations

from pathlib import Path

from attnkit.checkpoint import load_checkpoint, model_from_checkpoint
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.decoding import SearchOptions
from attnkit.plugin import expect_task
from attnkit.tasks.translation import Translator

GREEDY = SearchOptions(beam=1, length_penalty=0.0, max_len_a=1.0, max_len_b=2)  # as long as the input


class Reverser:
    """``Reverser.from_checkpoint(path).reverse(["a b c"])`` -> ``["c b a"]``."""

    def __init__(self, translator: Translator):
        self.translator = translator

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> Reverser:
        return cls.from_state(load_checkpoint(path), device=device, path=path)

    @classmethod
    def from_state(cls, state: dict, *, device: str = "auto", path: str | Path = "checkpoint") -> Reverser:
        expect_task(state, "reverse", path)  # a translation checkpoint is refused, naming what it is
        model = model_from_checkpoint(state)
        return cls(Translator(model, SubwordTokenizer.from_state_dict(state["tokenizer"]), device))

    def reverse(self, texts: list[str]) -> list[str]:
        return [t.text for t in self.translator.translate(texts, GREEDY)]

    def accuracy(self, pairs: list[tuple[str, str]]) -> float:
        """The share of sequences reversed exactly."""
        got = self.reverse([s for s, _ in pairs])
        return sum(g.split() == t.split() for g, (_, t) in zip(got, pairs)) / max(len(pairs), 1)
