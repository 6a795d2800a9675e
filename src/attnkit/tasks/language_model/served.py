"""A language-model checkpoint as the server serves it: continues prompts (``POST /v1/generate``),
whole or streamed one token at a time (:class:`GenerationStream`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch

from ...decoding import Greedy, Sampling, SearchOptions, decode_step
from ...decoding.controls import prepare
from ...decoding.sampling import seeded_generator
from ...model.config import LMConfig
from ...plugin.served import parameter_count
from .generator import Generation, LanguageModel, start_from_prompt

OnToken = Callable[[dict[str, Any]], None]


class LanguageModelServed:
    task = "generate"

    def __init__(self, name: str, arch: str, lm: LanguageModel):
        self.name, self.arch, self.lm = name, arch, lm

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str, **engine: Any) -> LanguageModelServed:
        """The served model; torch alone decodes it, whatever the server's ``engine`` options say."""
        return cls(name, state["arch"], LanguageModel.from_state(state, device=device, path=name))

    @property
    def max_src_tokens(self) -> int:
        return self.lm.model.config.max_len - 1  # bos takes one position

    def count_tokens(self, text: str) -> int:
        return len(self.lm.tokenizer.encode(text, side="src"))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function, or a stream factory."""
        if op == "generate":
            return lambda items: self.generate(items, o["options"]), None
        if op == "generate_stream":
            return None, lambda: self.stream(o["options"], on_token=on_event)
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def generate(self, prompts: list[str], options: SearchOptions) -> list[list[Generation]]:
        return self.lm.generate(prompts, options)

    def stream(self, options: SearchOptions, *, on_token: OnToken) -> GenerationStream:
        """One prompt's continuation, decoded a step at a time (the batcher's :class:`Stream`)."""
        return GenerationStream(self.lm, options, on_token)

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


class GenerationStream:
    """Greedy search or sampling of one prompt, one token per :meth:`step`, each token handed to
    ``on_token`` as ``{"token": id, "text": piece}`` the moment it is chosen; the result is
    ``[Generation]``, equal to ``LanguageModel.generate`` of the prompt (same options and seed).

    The pieces concatenate to the result's ``continuation``: each is what the detokenized text gained
    with its token. Text that is not final yet (an incomplete character, ``\ufffd``) waits for a later
    token; what still waits at the end comes in a last event with ``"token": None``.
    """

    def __init__(self, lm: LanguageModel, options: SearchOptions, on_token: OnToken):
        if not (options.greedy or options.sample) or options.nbest != 1:
            raise ValueError("a generation stream is greedy search or one sample")
        self.lm, self.options, self.on_token = lm, options, on_token
        self.sampling = options.sampling
        self.generator = seeded_generator(options.seed, lm.device) if options.sample else None
        self.search: Greedy | Sampling | None = None
        self.shown = ""  # the text the events have carried so far

    def __len__(self) -> int:
        return 0 if self.search is None else len(self.search)

    @torch.no_grad()
    def add(self, items: list[tuple[Hashable, Any]]) -> list[tuple[Hashable, Any]]:
        """Start the one prompt a stream decodes (the server gives each streamed request its own)."""
        if self.search is not None or len(items) != 1:
            raise ValueError("a generation stream decodes one prompt")
        ((self.tag, text),) = items
        self.prompt = self.lm.tokenizer.encode(text, side="src")
        limit = self.lm.limit(len(self.prompt), self.options)  # as generate's
        cfg = self.lm.model.config
        prompt = torch.tensor([self.prompt], dtype=torch.long, device=self.lm.device)  # (1, P)
        self.state, _ = start_from_prompt(self.lm.model, prompt)
        bos = torch.full((1, 1), cfg.bos_id, dtype=torch.long, device=self.lm.device)
        history = torch.cat([bos, prompt], dim=1)  # (1, P + 1): steps from the newest; the controls see all
        limits = torch.full((1,), limit, device=self.lm.device)  # (1,)
        self.step_controls, forced = prepare(cfg, limits, None, self.options.controls)
        kept = self.step_controls is not None
        if self.sampling is None:
            self.search = Greedy(cfg.eos_id, history, limits, history=kept, forced=forced)
        else:
            self.search = Sampling(
                cfg.eos_id,
                history,
                limits,
                sampling=self.sampling,
                generator=self.generator,
                history=kept,
                forced=forced,
            )
        return []

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, Any]]:
        search = self.search
        assert search is not None  # add came first (the batcher's order)
        before = len(search.tokens[0])
        finished = decode_step(
            self.lm.model, self.state, search, min_len=self.options.min_length, controls=self.step_controls
        )
        tokens = search.tokens[0]
        if len(tokens) > before:  # a token, not eos
            self.on_token({"token": tokens[-1], "text": self._piece(tokens)})
        if not finished:
            return []
        ((_, hyp),) = finished
        decode = self.lm.tokenizer.decode
        gen = Generation(decode(self.prompt + hyp.tokens), decode(hyp.tokens), hyp.score, hyp.tokens)
        if gen.continuation != self.shown and gen.continuation.startswith(self.shown):
            self.on_token({"token": None, "text": gen.continuation[len(self.shown) :]})
        return [(self.tag, [gen])]

    def _piece(self, tokens: list[int]) -> str:
        """What the text gained since the last event ("" while it is not final)."""
        text = self.lm.tokenizer.decode(tokens)
        if not text.startswith(self.shown) or text.endswith("\ufffd"):
            return ""
        piece, self.shown = text[len(self.shown) :], text
        return piece
