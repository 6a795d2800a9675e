"""Use a trained language model: continue prompts (greedy, beam or sampling) and score text.

    lm = LanguageModel.from_checkpoint("runs/lm_en/checkpoint_best.pt")
    lm.generate(["A dog"], max_len_b=20, sample=True, temperature=0.8, top_p=0.9, nbest=3, seed=1)
    lm.score(["A dog runs on the beach ."]).perplexity

The searches are the translation ones, continued from the state the prompt leaves
(``greedy_decode``, ``beam_decode``, ``sample_decode``). Prompts are grouped by length in pieces, so
a batch needs no padding and every row continues at the same position; a batch holds at most
``MAX_ROWS`` rows (samples or beams), however many prompts or samples are asked for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ...checkpoint import load_checkpoint, model_from_checkpoint
from ...data.tokenizer import SubwordTokenizer
from ...decoding.common import length_limit
from ...decoding.compiled import CompiledDecoding, refuse_on_cpu
from ...decoding.options import SearchOptions
from ...decoding.pick import decode
from ...decoding.sampling import seeded_generator
from ...device import resolve_device
from ...errors import DataError
from ...model import interface
from ...model.config import LMConfig
from ...model.interface import DecoderState
from ...plugin.served import ServedWrapper, as_list
from . import SEARCH
from .continuation import Generation, GenerationStream, start_from_prompt
from .scoring import LMScores, score_texts, text_ids

# Rows (prompts x samples, or prompts x beams) decoded together: bounds one batch's cache, so
# --num-samples or a long prompt file costs time, not memory.
MAX_ROWS = 256


class LanguageModel(ServedWrapper):
    """A decoder-only model, its tokenizer and a device; stateless between calls. The server serves
    this object itself (:meth:`serve`: ``POST /v1/generate``, whole or streamed token by token)."""

    task = "generate"

    def __init__(self, model: nn.Module, tokenizer: SubwordTokenizer, device: str | torch.device = "cpu"):
        assert isinstance(model, interface.LanguageModel), "a decoder-only model: init_state and decode"
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.name, self.arch = self.task, ""  # the server's name for it and the arch: serve() sets them
        self.layout: CompiledDecoding | None = None  # the compiled step, after compile()

    def compile(self, *, announce: Callable[[str], None] | None = None, **options: Any) -> LanguageModel:
        """Decode through the model's own step compiled by ``torch.compile`` from now on (CUDA
        graphs on a GPU; refused on a CPU): as :meth:`attnkit.tasks.translation.Translator.compile`.
        Prompts run eagerly, the steps after them compiled."""
        refuse_on_cpu(self.device)
        self.layout = CompiledDecoding(self.model, announce=announce, **options)
        return self

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> LanguageModel:
        return cls.from_state(load_checkpoint(path), device=device, path=path)

    @classmethod
    def from_state(
        cls, state: dict, *, device: str = "auto", path: str | Path = "checkpoint"
    ) -> LanguageModel:
        """From a loaded checkpoint (:func:`attnkit.checkpoint.load_checkpoint`)."""
        from ...plugin import expect_task  # the registry imports this module

        expect_task(state, "generate", path)
        return cls(model_from_checkpoint(state), SubwordTokenizer.from_state_dict(state["tokenizer"]), device)

    @torch.no_grad()
    def generate(
        self,
        prompts: str | list[str],
        options: SearchOptions | None = None,
        *,
        num_samples: int | None = None,
        max_new_tokens: int | None = None,
        **fields: Any,
    ) -> list[list[Generation]]:
        """For each prompt (one str is one prompt) its continuations, searched as ``options`` say
        (default :data:`SEARCH`; ``fields`` change single options): ``nbest`` samples, or the beam's
        ``nbest`` best. New tokens,
        eos included: at most ``max_len_a`` * prompt pieces + ``max_len_b``, within ``max_len``.
        ``num_samples`` and ``max_new_tokens`` are nbest's and max_len_b's names before.

        no_repeat_ngram_size, repetition_penalty: see :mod:`attnkit.decoding.controls`; they count
        the prompt as already produced, as Hugging Face's ``generate`` does.
        """
        if num_samples is not None:
            fields["nbest"] = num_samples
        if max_new_tokens is not None:
            fields["max_len_b"] = max_new_tokens
        options = SearchOptions.of(options or SEARCH, **fields)  # one check, one choice (decode)
        prompts = as_list(prompts)
        encoded = [self.tokenizer.encode(p, side="src") for p in prompts]
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, ids in enumerate(encoded):
            by_length[len(ids)].append(i)
        results: list[list[Generation]] = [[] for _ in prompts]
        generator = seeded_generator(options.seed, self.device)
        for length in sorted(by_length):
            limit = self.limit(length, options)
            rows = by_length[length]
            # independent samples: one row each; beams: K rows a prompt; MAX_ROWS rows at a time
            flat = [i for i in rows for _ in range(options.nbest)] if options.sample else rows
            per_batch = MAX_ROWS if options.sample else max(1, MAX_ROWS // options.beam)
            for start in range(0, len(flat), per_batch):
                chunk = flat[start : start + per_batch]
                state, last, limits = self._start([encoded[i] for i in chunk], limit)
                found = decode(self.model, state, last, limits, options, generator=generator)
                for i, hs in zip(chunk, found, strict=True):
                    results[i] += [self._generation(encoded[i], h) for h in hs]
        return results

    def limit(self, prompt_len: int, options: SearchOptions) -> int:
        """New tokens at most, eos included, after a prompt of ``prompt_len`` pieces: the options'
        ``max_len_a`` * prompt_len + ``max_len_b``, within the positions bos and the prompt leave."""
        room = int(self.model.config.max_len) - prompt_len
        if room < 1:
            raise DataError(
                f"a prompt of {prompt_len} pieces leaves no room in max_len={self.model.config.max_len}"
            )
        return length_limit(prompt_len, options.max_len_a, options.max_len_b, room)

    def _start(self, prompts: list[list[int]], limit: int) -> tuple[DecoderState, Tensor, Tensor]:
        """The state after N prompts of one length, bos and the prompts (N, P + 1) (the searches step
        from the newest token; the controls see them all), and the limits (N,)."""
        n, length = len(prompts), len(prompts[0])
        prompt = torch.tensor(prompts, dtype=torch.long, device=self.device).view(n, length)  # (N, P)
        state, _ = start_from_prompt(self.model, prompt, layout=self.layout, limit=limit)
        bos = torch.full((n, 1), self.model.config.bos_id, dtype=torch.long, device=self.device)
        return state, torch.cat([bos, prompt], dim=1), torch.full((n,), limit, device=self.device)

    def _generation(self, prompt_ids: list[int], hyp) -> Generation:
        decode = self.tokenizer.decode
        return Generation(decode(prompt_ids + hyp.tokens), decode(hyp.tokens), hyp.score, hyp.tokens)

    def score(self, texts: list[str], *, batch_tokens: int = 8000) -> LMScores:
        """Negative log-likelihood of every piece and the end of each text, given bos and the text
        so far: :func:`.scoring.score_texts`, the function the trainer's validation calls."""
        return score_texts(self.model, self.tokenizer, texts, self.device, batch_tokens=batch_tokens)

    @torch.no_grad()
    def self_attention(self, text: str) -> tuple[list[str], torch.Tensor]:
        """Pieces (bos first) and the self-attention of every layer and head (L, H, T, T) over them."""
        cfg = self.model.config
        ids = text_ids(self.model, self.tokenizer, [text])[0] if text.strip() else []
        if not ids:
            raise DataError("the text is empty: nothing to draw")
        x = torch.tensor([[cfg.bos_id, *ids]], device=self.device)
        weights = self.model.decode(x, self.model.init_state(1), need_weights=True).self_attn
        assert weights is not None  # asked for
        pieces = ["<s>"] + [self.tokenizer.id_to_piece(i, side="src") for i in ids]
        return pieces, torch.stack([w[0] for w in weights]).cpu()  # (L, H, T, T)

    # -- served (attnkit.plugin.served.ServedModel) ------------------------------------------------
    @property
    def max_src_tokens(self) -> int:
        return self.model.config.max_len - 1  # bos takes one position

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, side="src"))

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function, or a stream factory."""
        if op == "generate":
            return lambda items: self.generate(items, o["options"]), None
        if op == "generate_stream":
            return None, lambda: GenerationStream(self, o["options"], on_event)
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def details(self) -> dict[str, Any]:
        cfg = self.model.config
        assert isinstance(cfg, LMConfig)  # the task's one arch, "lm"
        return {
            "max_src_tokens": self.max_src_tokens,
            "layers": cfg.n_layers,
            "heads": cfg.n_heads,
        }
