"""The inference wrapper: reverse sequences with a trained checkpoint (greedy search)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnkit.checkpoint import load_checkpoint, model_from_checkpoint
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.decoding import SearchOptions
from attnkit.plugin import expect_task
from attnkit.plugin.served import ServedWrapper, parameter_count
from attnkit.tasks.translation import Translator

GREEDY = SearchOptions(beam=1, length_penalty=0.0, max_len_a=1.0, max_len_b=2)  # as long as the input


class Reverser(ServedWrapper):
    """``Reverser.from_checkpoint(path).reverse(["a b c"])`` -> ``["c b a"]``. The server serves
    this object itself (:meth:`serve`; the members of ``attnkit.plugin.served.ServedModel``)."""

    task = "reverse"

    def __init__(self, translator: Translator, name: str = "reverse", arch: str = ""):
        self.translator, self.name, self.arch = translator, name, arch

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

    # -- served (serve and release: ServedWrapper's) ---------------------------------------------------
    @property
    def model(self):
        return self.translator.model  # what ServedWrapper.release frees

    @property
    def max_src_tokens(self) -> int:
        return self.translator.max_src_len

    def count_tokens(self, text: str) -> int:
        return len(self.translator.tokenizer.encode(text, side="src"))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        if op == "reverse":
            return self.reverse, None  # a batched function; no stream
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def describe(self) -> dict[str, Any]:
        params = parameter_count(self.translator.model)
        return {"name": self.name, "task": self.task, "arch": self.arch, "parameters": params}
