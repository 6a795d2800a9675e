"""A language-model checkpoint as the server serves it: continues prompts (``POST /v1/generate``)."""

from __future__ import annotations

from typing import Any

from ...model.config import LMConfig
from ..base import parameter_count
from .generator import Generation, LanguageModel


class LanguageModelServed:
    task = "generate"

    def __init__(self, name: str, arch: str, lm: LanguageModel):
        self.name, self.arch, self.lm = name, arch, lm

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str) -> LanguageModelServed:
        return cls(name, state["arch"], LanguageModel.from_state(state, device=device, path=name))

    @property
    def max_src_tokens(self) -> int:
        return self.lm.model.config.max_len - 1  # bos takes one position

    def count_tokens(self, text: str) -> int:
        return len(self.lm.tokenizer.encode(text, side="src"))

    def generate(self, prompts: list[str], **options: Any) -> list[list[Generation]]:
        return self.lm.generate(prompts, **options)

    def release(self) -> None:
        """Free the weights (they decode in another process); the tokenizer and config stay."""
        self.lm.model.to("meta")

    def describe(self) -> dict[str, Any]:
        cfg = self.lm.model.config
        assert isinstance(cfg, LMConfig)  # the task's one arch, "lm"
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "max_src_tokens": self.max_src_tokens,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
            "parameters": parameter_count(self.lm.model),
            "device": str(self.lm.device),
        }
