"""Caption images with a trained captioner: ``Captioner.from_checkpoint(path).caption([image, ...])``.

Images (files, uploaded bytes, or uint8 tensors already read) are read at the model's size, encoded
in batches, and searched with the same greedy, beam and sampling searches that translate, from a
state whose memory is the image's regions. Each word's cross-attention over the regions comes back
when asked for (``return_attention``): the picture of :mod:`.attention_maps`.

Legend: B images, C channels, S image size, R regions, T caption tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, cast

import torch
from torch import Tensor, nn

from ...attention.cache import DeferredKVCache
from ...attention.rollout import through_encoder
from ...checkpoint import load_checkpoint, model_from_checkpoint
from ...data.pieces import words
from ...data.tokenizer import SubwordTokenizer
from ...decoding.common import Hypothesis, length_limit
from ...decoding.compiled import CompiledDecoding, refuse_on_cpu
from ...decoding.options import SearchOptions
from ...decoding.pick import decode
from ...decoding.sampling import seeded_generator
from ...device import resolve_device
from ...errors import ConfigError
from ...model.captioner import CaptionTransformer
from ...model.interface import IncrementalDecoder
from ...plugin.served import ServedWrapper, as_list
from . import SEARCH
from .images import ImageSource, as_floats, read_image

Image: TypeAlias = "ImageSource | Tensor"  # a file, its bytes, a PIL image, or (C, S, S) uint8 pixels


@dataclass
class Caption:
    """One image's caption; ``nbest`` holds (text, score) pairs: a search's best first, or, when
    sampling, the draws in the order drawn (``text`` is then the first draw's).

    attention: (T + 1, R) the last decoder layer's cross-attention over the regions, averaged over
    heads, one row per produced piece and eos, when asked for.
    """

    text: str
    score: float
    nbest: list[tuple[str, float]]
    tokens: list[int]  # the first hypothesis' ids (the best, from a search), without eos
    pieces: list[str]  # its pieces + "</s>"
    attention: Tensor | None = None


class Captioner(ServedWrapper):
    """A captioning model, its tokenizer and a device; stateless between calls. The server serves
    this object itself (:meth:`serve`: ``POST /v1/caption``, an uploaded image)."""

    task = "caption"

    def __init__(self, model: nn.Module, tokenizer: SubwordTokenizer, device: str | torch.device = "cpu"):
        assert isinstance(model, CaptionTransformer), "a captioning model"
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.layout: CompiledDecoding | None = None  # the compiled step, after compile()
        self.name, self.arch = self.task, ""  # the server's name for it and the arch: serve() sets them

    def compile(self, *, announce: Callable[[str], None] | None = None, **options: Any) -> Captioner:
        """Decode through the model's own step compiled by ``torch.compile`` from now on (CUDA
        graphs on a GPU; refused on a CPU): as :meth:`attnkit.tasks.translation.Translator.compile`."""
        refuse_on_cpu(self.device)
        self.layout = CompiledDecoding(self.model, announce=announce, **options)
        return self

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str = "auto") -> Captioner:
        return cls.from_state(load_checkpoint(path), device=device, path=path)

    @classmethod
    def from_state(cls, state: dict, *, device: str = "auto", path: str | Path = "checkpoint") -> Captioner:
        from ...plugin import expect_task  # the registry imports this module

        expect_task(state, "caption", path)
        model = model_from_checkpoint(state)
        return cls(model, SubwordTokenizer.from_state_dict(state["tokenizer"]), device)

    @property
    def image_size(self) -> int:
        return int(self.model.config.image_size)

    @property
    def max_tokens(self) -> int:
        """The most pieces a caption may have, eos included (bos takes one of max_len positions)."""
        return int(self.model.config.max_len) - 1

    def read(self, image: Image, *, name: str | None = None) -> Tensor:
        """(C, S, S) uint8 pixels of a file or its bytes, checked; a tensor passes as it is."""
        if isinstance(image, Tensor):
            return image
        cfg = self.model.config
        return read_image(image, size=cfg.image_size, channels=cfg.channels, name=name)

    @torch.no_grad()
    def caption(
        self,
        images: Image | Sequence[Image],
        options: SearchOptions | None = None,
        *,
        batch_size: int = 32,
        return_attention: bool = False,
        names: Sequence[str] | None = None,
        **fields: Any,
    ) -> list[Caption]:
        """A caption per image (a path, bytes, a PIL image or read pixels is one image), in order,
        searched as ``options`` say (default :data:`SEARCH`;
        ``fields`` change single options: ``caption(images, beam=1)``; with ``sample``, ``nbest``
        captions per image drawn from a generator seeded with ``seed``). Pieces, eos included: at
        most ``max_len_b`` (an image has no tokens for ``max_len_a`` to scale), within ``max_len``.
        ``names``: what errors call each image (default: its path)."""
        options = SearchOptions.of(options or SEARCH, **fields)
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if options.sample and return_attention:
            raise ConfigError("return_attention is for search, not sampling")
        limit = length_limit(0, options.max_len_a, options.max_len_b, self.max_tokens)
        from PIL.Image import Image as PILImage

        images = as_list(images, (str, Path, bytes, PILImage, Tensor))
        pixels = [self.read(img, name=names[i] if names else None) for i, img in enumerate(images)]
        generator = seeded_generator(options.seed, self.device) if options.sample else None
        out: list[Caption] = []
        for start in range(0, len(pixels), batch_size):
            batch = as_floats(torch.stack(pixels[start : start + batch_size]).to(self.device))  # (B, C, S, S)
            for hyps in self._search(batch, limit, options, generator, return_attention):
                out.append(self._caption(hyps))
        return out

    def _search(
        self, images: Tensor, limit: int, options: SearchOptions, generator, attention: bool
    ) -> list[list[Hypothesis]]:
        """Every image's hypotheses, best (or first drawn) first."""
        model = self.model
        decoder = cast(IncrementalDecoder, model)  # keeps the search contract (TargetDecoder.decode)
        rows = options.nbest if options.sample else 1  # samples: each its own row from the start
        enc = model.encode(images.repeat_interleave(rows, dim=0))
        state = model.init_state(enc, cache=DeferredKVCache if self.layout is None else self.layout(limit))
        n = images.size(0) * rows
        first = torch.full((n, 1), model.config.bos_id, dtype=torch.long, device=images.device)  # (N, 1)
        limits = torch.full((n,), limit, dtype=torch.long, device=images.device)  # (N,)
        found = decode(
            decoder, state, first, limits, options, return_attention=attention, generator=generator
        )
        if options.sample:  # one row a sample: each image's ``rows`` samples
            return [[h for (h,) in found[b * rows : (b + 1) * rows]] for b in range(images.size(0))]
        return found

    def _caption(self, hyps: list[Hypothesis]) -> Caption:
        best, tok = hyps[0], self.tokenizer
        return Caption(
            text=tok.decode(best.tokens, side="tgt"),
            score=best.score,
            nbest=[(tok.decode(h.tokens, side="tgt"), h.score) for h in hyps],
            tokens=best.tokens,
            pieces=[tok.id_to_piece(t, side="tgt") for t in best.tokens] + ["</s>"],
            attention=None if best.attention is None else best.attention.float().cpu(),
        )

    def encoder_attention(self, pixels: Tensor) -> Tensor | None:
        """(L, H, R, R) the encoder's self-attention over the regions of ``pixels`` (C, S, S) uint8, or
        None when the captioner has no encoder layers."""
        with torch.no_grad():
            weights = self.model.encode(as_floats(pixels[None].to(self.device)), need_weights=True)
        if not weights.self_attn:
            return None
        return torch.stack([w[0] for w in weights.self_attn]).float().cpu()

    def attention_of(self, pixels: Tensor, tokens: list[int]) -> Tensor:
        """(L, H, T, R) every cross-attention of caption ``tokens`` (ids without bos or eos) of the
        image ``pixels`` (C, S, S) uint8, teacher-forced: row t is the step that produced piece t (the
        last, eos)."""
        model, device = self.model, self.device
        tgt_in = torch.tensor([[model.config.bos_id, *tokens]], device=device)  # (1, T)
        with torch.no_grad():
            enc = model.encode(as_floats(pixels[None].to(device)))  # (1, R, D)
            out = model.decode(tgt_in, model.init_state(enc), need_weights=True)
        assert out.cross_attn is not None  # asked for with need_weights
        return torch.stack([w[0] for w in out.cross_attn]).float().cpu()  # (L, H, T, R)

    # -- served (attnkit.plugin.served.ServedModel) ------------------------------------------------
    @property
    def regions(self) -> int:
        """What one image costs the batcher: its regions, as a sentence costs its tokens."""
        gh, gw = self.model.grid
        return gh * gw

    def check(self, image: bytes) -> None:
        """Read the upload now (a bad one is a one-line DataError: 4xx before any decoding)."""
        self.read(image, name="the uploaded image")

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function."""
        if op == "caption":
            return lambda items: self.answer(items, o["options"], attention=o["attention"]), None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def answer(self, images: list[bytes], options: SearchOptions, *, attention: bool = False) -> list[dict]:
        """``POST /v1/caption``'s answer for each uploaded image: caption, score, n-best and, with
        ``attention``, every cross-attention."""
        out = []
        for image in images:
            pixels = self.read(image, name="the uploaded image")  # (C, S, S)
            (c,) = self.caption([pixels], options)
            answer: dict[str, Any] = {
                "caption": c.text,
                "score": c.score,
                "nbest": [{"text": t, "score": s} for t, s in c.nbest],
            }
            if attention:
                # the returned caption's own attention: its tokens teacher-forced, no second search
                cross = self.attention_of(pixels, c.tokens)  # (L, H, T, R)
                L, H = cross.shape[:2]
                ws, index = words(c.pieces)  # the attention page's word view, as for translation
                answer["sequences"] = {"tgt": {"pieces": c.pieces, "words": ws, "word_of_piece": index}}
                answer["attention"] = {
                    "cross": {
                        "rows": "tgt",
                        "cols": "regions",
                        "grid": list(self.model.grid),
                        "layers": L,
                        "heads": H,
                        "weights": cross.double().round(decimals=3).tolist(),
                    }
                }
                encoder = self.encoder_attention(pixels)  # (L', H, R, R) or None
                if encoder is not None:  # each word's attention followed through the encoder (T, R)
                    rolled = through_encoder(cross, encoder, "rollout")
                    answer["attention"]["cross"]["rollout"] = rolled.double().round(decimals=4).tolist()
            out.append(answer)
        return out

    def details(self) -> dict[str, Any]:
        cfg = self.model.config
        return {
            "image_size": cfg.image_size,
            "encoder": cfg.encoder,
            "regions": self.regions,
            "layers": [cfg.n_encoder_layers, cfg.n_decoder_layers],
            "heads": cfg.n_heads,
        }
