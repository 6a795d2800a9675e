"""Model configs: the Transformer (paper Table 3 "base"), a decoder-only LM, an encoder classifier and
an image captioner."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ..config import ConfigBase

ACTIVATIONS = ("relu", "gelu", "swish")
NORMS = ("post", "pre")
POSITIONALS = ("sinusoidal", "learned", "relative", "rotary")
POOLINGS = ("mean", "first", "attention")
CAPTION_ENCODERS = ("patches", "cnn")
CNNS = ("resnet18", "resnet34", "resnet50")


@dataclasses.dataclass
class BlockConfig(ConfigBase):
    """What every attention block needs, whichever model stacks them.

    norm: "post" = LayerNorm(x + Sublayer(x)) as in the paper; "pre" = x + Sublayer(LayerNorm(x)).
    dropout: on embeddings and every sublayer output (P_drop); attention_dropout: on attention weights.
    positional: "sinusoidal" or "learned" add absolute positions to the embeddings; "relative"
    (Shaw et al., 2018: learned embeddings of the distance clipped to relative_clip, added to the
    keys and, with relative_values, to the values) and "rotary" (RoPE) act inside self-attention.
    """

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "post"
    positional: str = "sinusoidal"
    max_len: int = 1024
    relative_clip: int = 16
    relative_values: bool = False
    bias: bool = True
    pad_id: int = 0
    # heads removed for good by `attnkit prune`: per kind (encoder, decoder, cross), per layer, the
    # indices of the heads gone (attnkit.heads.prune_heads); empty: every layer has n_heads
    pruned_heads: dict[str, list[list[int]]] = dataclasses.field(default_factory=dict)

    def validate(self) -> None:
        self._positive("d_model", "n_heads", "d_ff", "max_len")
        self._check(
            isinstance(self.pruned_heads, dict), "pruned_heads", "must map a kind to a list per layer"
        )
        for kind, layers in self.pruned_heads.items():
            self._check(kind in ("encoder", "decoder", "cross"), "pruned_heads", f"unknown kind {kind!r}")
            for heads in layers:
                ok = (
                    all(isinstance(h, int) and 0 <= h < self.n_heads for h in heads)
                    and len(set(heads)) < self.n_heads
                )
                self._check(
                    ok,
                    "pruned_heads",
                    f"{kind}: {heads} must be distinct heads below {self.n_heads}, one kept",
                )
        self._check(
            self.d_model % self.n_heads == 0, "d_model", f"must be divisible by n_heads={self.n_heads}"
        )
        for name in ("dropout", "attention_dropout"):
            self._check(0.0 <= getattr(self, name) < 1.0, name, "must be in [0, 1)")
        self._choice("activation", ACTIVATIONS)
        self._choice("norm", NORMS)
        self._choice("positional", POSITIONALS)
        self._positive("relative_clip")
        if self.relative_values:
            self._check(self.positional == "relative", "relative_values", "needs positional: relative")
        if self.positional == "rotary":
            d_head = self.d_model // self.n_heads
            self._check(d_head % 2 == 0, "positional", f"rotary needs an even head size, got {d_head}")
        self._check(self.pad_id >= 0, "pad_id", "must be >= 0")


@dataclasses.dataclass
class TransformerConfig(BlockConfig):
    """The encoder-decoder Transformer.

    share_vocab: one embedding matrix for source and target (needs equal vocabulary sizes).
    tie_output: the pre-softmax projection shares the target embedding (paper section 3.4);
    embeddings are multiplied by sqrt(d_model) in either case.
    output_bias: a bias on the tied projection (Marian's final_logits_bias; imported models).
    """

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    share_vocab: bool = False
    tie_output: bool = True
    output_bias: bool = False
    bos_id: int = 1
    eos_id: int = 2

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, dropout=0.1),
        "big": dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, dropout=0.3),
        "tiny": dict(
            d_model=32,
            n_heads=4,
            d_ff=64,
            n_encoder_layers=2,
            n_decoder_layers=2,
            dropout=0.0,
            src_vocab_size=20,
            tgt_vocab_size=20,
            max_len=64,
        ),
    }

    def validate(self) -> None:
        super().validate()
        self._positive("src_vocab_size", "tgt_vocab_size", "n_encoder_layers", "n_decoder_layers")
        if self.share_vocab:
            self._check(
                self.src_vocab_size == self.tgt_vocab_size,
                "share_vocab",
                "needs src_vocab_size == tgt_vocab_size "
                f"(got {self.src_vocab_size} and {self.tgt_vocab_size})",
            )
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check(0 <= getattr(self, name) < vocab, name, f"must be a token id below {vocab}")
        self._check(
            len({self.pad_id, self.bos_id, self.eos_id}) == 3, "eos_id", "pad, bos and eos ids must differ"
        )


@dataclasses.dataclass
class LMConfig(BlockConfig):
    """Decoder-only language model: causal self-attention blocks, no cross-attention."""

    vocab_size: int = 8000
    n_layers: int = 6
    tie_output: bool = True
    bos_id: int = 1
    eos_id: int = 2

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0, vocab_size=20, max_len=64),
    }

    def validate(self) -> None:
        super().validate()
        self._positive("vocab_size", "n_layers")
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check(0 <= getattr(self, name) < self.vocab_size, name, f"must be below {self.vocab_size}")


@dataclasses.dataclass
class ClassifierConfig(BlockConfig):
    """Encoder-only classifier: the encoder stack, a pooling of its outputs, a linear layer.

    pooling: "mean" over real tokens; "first": a CLS token (id ``cls_id``, by default the tokenizer's
    bos) is prepended and its output used (BERT's [CLS]); "attention": additive attention pooling,
    one learned weight per token (seed 002's document classification).
    """

    vocab_size: int = 8000
    n_layers: int = 6
    n_classes: int = 2
    pooling: str = "mean"
    cls_id: int = 1

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0, vocab_size=20, max_len=64),
    }

    def validate(self) -> None:
        super().validate()
        self._positive("vocab_size", "n_layers", "n_classes")
        self._choice("pooling", POOLINGS)
        for name in ("pad_id", "cls_id"):
            self._check(0 <= getattr(self, name) < self.vocab_size, name, f"must be below {self.vocab_size}")
        self._check(self.cls_id != self.pad_id, "cls_id", "must differ from pad_id")


@dataclasses.dataclass
class CaptionerConfig(BlockConfig):
    """Image captioner: an image encoder turns an image into a grid of region vectors; the
    Transformer's decoder writes the caption with cross-attention over the regions (Xu et al., 2015,
    "Show, Attend and Tell", with the Transformer's attention).

    encoder "patches" (ViT, Dosovitskiy et al., 2021): the image_size x image_size image cut into
    patch_size x patch_size patches, each linearly projected, plus a learned position per patch;
    "cnn": the last feature map of a torchvision ``cnn`` (resnet18/34/50; needs torchvision),
    loaded from ``cnn_weights`` (a state-dict file) when given, each cell projected to d_model.
    Either way ``n_encoder_layers`` self-attention layers (0: the regions go to the decoder as they
    are) then read the regions. ``channels``: 3 (RGB) or 1 (grey; patches only).
    """

    tgt_vocab_size: int = 8000
    image_size: int = 224
    patch_size: int = 16
    channels: int = 3
    encoder: str = "patches"
    cnn: str = "resnet18"
    cnn_weights: str = ""
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    tie_output: bool = True
    bos_id: int = 1
    eos_id: int = 2

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(
            d_model=32,
            n_heads=4,
            d_ff=64,
            n_encoder_layers=1,
            n_decoder_layers=2,
            dropout=0.0,
            tgt_vocab_size=20,
            max_len=24,
            image_size=32,
            patch_size=4,
        ),
    }

    def validate(self) -> None:
        super().validate()
        self._positive("tgt_vocab_size", "image_size", "patch_size", "n_decoder_layers")
        self._check(self.channels in (1, 3), "channels", "must be 1 (grey) or 3 (RGB)")
        self._check(self.n_encoder_layers >= 0, "n_encoder_layers", "must be >= 0")
        self._choice("encoder", CAPTION_ENCODERS)
        if self.encoder == "patches":
            self._check(
                self.image_size % self.patch_size == 0,
                "patch_size",
                f"must divide image_size={self.image_size}",
            )
        else:
            self._choice("cnn", CNNS)
            self._check(self.channels == 3, "channels", "a torchvision CNN reads 3 channels (RGB)")
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check(
                0 <= getattr(self, name) < self.tgt_vocab_size, name, f"must be below {self.tgt_vocab_size}"
            )
        self._check(
            len({self.pad_id, self.bos_id, self.eos_id}) == 3, "eos_id", "pad, bos and eos ids must differ"
        )


@dataclasses.dataclass
class RNNConfig(ConfigBase):
    """The RNN encoder-decoder. ``attention``: "additive" (Bahdanau) or "multiplicative" (Luong)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    emb_size: int = 256
    hidden_size: int = 512
    attention_size: int = 512
    attention: str = "additive"
    n_encoder_layers: int = 1
    dropout: float = 0.2
    max_len: int = 256
    share_vocab: bool = False
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(
            emb_size=32,
            hidden_size=48,
            attention_size=32,
            dropout=0.0,
            src_vocab_size=20,
            tgt_vocab_size=20,
            max_len=64,
        ),
    }

    def validate(self) -> None:
        self._positive("src_vocab_size", "tgt_vocab_size", "emb_size", "hidden_size", "attention_size")
        self._positive("n_encoder_layers", "max_len")
        self._choice("attention", ("additive", "multiplicative"))
        self._check(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        if self.share_vocab:
            self._check(
                self.src_vocab_size == self.tgt_vocab_size, "share_vocab", "needs equal vocabulary sizes"
            )
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check(0 <= getattr(self, name) < vocab, name, f"must be a token id below {vocab}")


# each arch's config (model.registry)
ModelConfig = TransformerConfig | RNNConfig | LMConfig | ClassifierConfig | CaptionerConfig
