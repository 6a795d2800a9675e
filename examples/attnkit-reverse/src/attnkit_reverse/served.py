"""A reversal checkpoint as ``attnkit serve`` serves it (``POST /v1/reverse``)."""

from __future__ import annotations

from typing import Any

from attnkit.plugin.served import parameter_count

from .reverser import Reverser


class ReverserServed:
    task = "reverse"

    def __init__(self, name: str, arch: str, reverser: Reverser):
        self.name, self.arch, self.reverser = name, arch, reverser

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str, **engine: Any) -> ReverserServed:
        return cls(name, state["arch"], Reverser.from_state(state, device=device, path=name))

    @property
    def max_src_tokens(self) -> int:
        return self.reverser.translator.max_src_len

    def count_tokens(self, text: str) -> int:
        return len(self.reverser.translator.tokenizer.encode(text, side="src"))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        if op == "reverse":
            return self.reverser.reverse, None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def release(self) -> None:
        self.reverser.translator.model.to("meta")

    def describe(self) -> dict[str, Any]:
        model = self.reverser.translator.model
        return {"name": self.name, "task": self.task, "arch": self.arch, "parameters": parameter_count(model)}
