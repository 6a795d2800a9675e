"""A captioner checkpoint as the server serves it: ``POST /v1/caption`` (an uploaded image)."""

from __future__ import annotations

from typing import Any

from ...attention.rollout import through_encoder
from ...data.pieces import words
from ...decoding.options import SearchOptions
from ...plugin.served import parameter_count
from .attention_maps import attention_of, encoder_attention
from .captioner import Captioner


class CaptionerServed:
    task = "caption"

    def __init__(self, name: str, arch: str, captioner: Captioner):
        self.name, self.arch, self.captioner = name, arch, captioner

    @classmethod
    def load(cls, name: str, state: dict[str, Any], device: str, **engine: Any) -> CaptionerServed:
        """The served model; torch alone decodes it, whatever the server's ``engine`` options say."""
        return cls(name, state["arch"], Captioner.from_state(state, device=device, path=name))

    @property
    def regions(self) -> int:
        """What one image costs the batcher: its regions, as a sentence costs its tokens."""
        gh, gw = self.captioner.model.grid
        return gh * gw

    def check(self, image: bytes) -> None:
        """Read the upload now (a bad one is a one-line DataError: 4xx before any decoding)."""
        self.captioner.read(image, name="the uploaded image")

    def operation(self, op: str, o: dict[str, Any], max_batch_tokens: int, on_event: Any) -> tuple:
        """What the server's decoding runs for ``op``: a batched function."""
        if op == "caption":
            return lambda items: self.caption(items, o["options"], attention=o["attention"]), None
        raise ValueError(f"unknown operation {op!r} for {self.name!r}")

    def caption(self, images: list[bytes], options: SearchOptions, *, attention: bool = False) -> list[dict]:
        """Each image's answer: caption, score, n-best and, with ``attention``, every cross-attention."""
        out = []
        for image in images:
            pixels = self.captioner.read(image, name="the uploaded image")  # (C, S, S)
            (c,) = self.captioner.caption([pixels], options)
            answer: dict[str, Any] = {
                "caption": c.text,
                "score": c.score,
                "nbest": [{"text": t, "score": s} for t, s in c.nbest],
            }
            if attention:
                # the returned caption's own attention: its tokens teacher-forced, no second search
                cross = attention_of(self.captioner, pixels, c.tokens)  # (L, H, T, R)
                L, H = cross.shape[:2]
                ws, index = words(c.pieces)  # the attention page's word view, as for translation
                answer["sequences"] = {"tgt": {"pieces": c.pieces, "words": ws, "word_of_piece": index}}
                answer["attention"] = {
                    "cross": {
                        "rows": "tgt",
                        "cols": "regions",
                        "grid": list(self.captioner.model.grid),
                        "layers": L,
                        "heads": H,
                        "weights": cross.double().round(decimals=3).tolist(),
                    }
                }
                encoder = encoder_attention(self.captioner, pixels)  # (L', H, R, R) or None
                if encoder is not None:  # each word's attention followed through the encoder (T, R)
                    rolled = through_encoder(cross, encoder, "rollout")
                    answer["attention"]["cross"]["rollout"] = rolled.double().round(decimals=4).tolist()
            out.append(answer)
        return out

    def release(self) -> None:
        """Free the weights (they decode in another process); the tokenizer and config stay."""
        self.captioner.model.to("meta")

    def describe(self) -> dict[str, Any]:
        cfg = self.captioner.model.config
        return {
            "name": self.name,
            "task": self.task,
            "arch": self.arch,
            "image_size": cfg.image_size,
            "encoder": cfg.encoder,
            "regions": self.regions,
            "layers": [cfg.n_encoder_layers, cfg.n_decoder_layers],
            "heads": cfg.n_heads,
            "parameters": parameter_count(self.captioner.model),
            "device": str(self.captioner.device),
        }
