"""A prompt's continuation: the decoder state after a prompt (:func:`start_from_prompt`), what a
search returns (:class:`Generation`), and one continuation a token at a time for the server's
streamed ``/v1/generate`` (:class:`GenerationStream`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...attention.cache import DeferredKVCache
from ...decoding import Greedy, Sampling, SearchOptions, decode_step
from ...decoding.common import Layout
from ...decoding.controls import prepare
from ...decoding.sampling import seeded_generator
from ...model.interface import DecoderState

OnToken = Callable[[dict[str, Any]], None]


def start_from_prompt(
    lm, prompt: Tensor, *, layout: Layout | None = None, limit: int = 0
) -> tuple[DecoderState, Tensor]:
    """Run bos + prompt (B, P) but its last piece through the LM: the state and the newest tokens (B, 1).

    The searches then continue from there, as they continue a translation from bos. ``layout``: the
    caches as a fixed layout for the prompt and ``limit`` new tokens (a compiled step's).
    """
    cfg = lm.config
    bos = torch.full((prompt.size(0), 1), cfg.bos_id, dtype=torch.long, device=prompt.device)
    # rows move lazily in the searches; or buffers written in place for a compiled step
    cache = DeferredKVCache if layout is None else layout(prompt.size(1) + limit)
    state = lm.init_state(prompt.size(0), cache=cache)
    if prompt.size(1) == 0:
        return state, bos
    lm.decode(torch.cat([bos, prompt[:, :-1]], dim=1), state)  # (B, P) positions cached
    return state, prompt[:, -1:]


@dataclass
class Generation:
    """One continuation: ``text`` is prompt + continuation, detokenized; ``score`` its log-probability
    (length-normalized for beam search)."""

    text: str
    continuation: str
    score: float
    tokens: list[int]  # the generated ids, without eos


class GenerationStream:
    """Greedy search or sampling of one prompt, one token per :meth:`step`, each token handed to
    ``on_token`` as ``{"token": id, "text": piece}`` the moment it is chosen; the result is
    ``[Generation]``, equal to ``LanguageModel.generate`` of the prompt (same options and seed).

    The pieces concatenate to the result's ``continuation``: each is what the detokenized text gained
    with its token. Text that is not final yet (an incomplete character, ``\ufffd``) waits for a later
    token; what still waits at the end comes in a last event with ``"token": None``.
    """

    def __init__(self, lm: Any, options: SearchOptions, on_token: OnToken):  # lm: a LanguageModel
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
