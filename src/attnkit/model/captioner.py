"""An image captioner: an image encoder reads an image into a grid of region vectors, and the
Transformer's decoder writes the caption with cross-attention over those regions.

This is "Show, Attend and Tell" (Xu et al., 2015) with the Transformer's attention: each word's
cross-attention is a distribution over the image's regions, so it can be drawn on the image. The
decoder is :class:`~.transformer.TargetDecoder`, the Transformer's own (``init_state``, ``decode``),
so the trainer and every search (greedy, beam, sampling) serve the captioner unchanged:

    enc = model.encode(images)              # (B, C, H, W) in [0, 1] -> memory (B, R, D)
    state = model.init_state(enc)
    out = model.decode(tgt_new, state)
    logits = model(images, tgt_in)

The regions come from patches (ViT: Dosovitskiy et al., 2021, eq. 1: x_p E + E_pos) or from the
last feature map of a torchvision CNN (Xu et al.'s annotation vectors), when torchvision is installed.

Legend: B images, C channels, H x W pixels, P patch size, gh x gw region grid, R = gh * gw regions,
D d_model, T target length, V vocabulary.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from ..positional import sinusoidal_encoding
from .config import CaptionerConfig
from .embedding import TokenEmbedding
from .layers import DecoderLayer
from .transformer import Encoder, EncoderOutput, TargetDecoder, fill_tied_output

# Images are standardised with ImageNet's channel statistics (what torchvision's CNNs expect).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def grid_positions(grid: tuple[int, int], d_model: int) -> Tensor:
    """(1, R, D) 2-D sinusoids: a region's row in the first D/2 dimensions, its column in the rest
    (the paper's section 3.5 encoding along each axis, as MAE fixes its patch positions).

    A learned position table starts from these, so where a patch sits is plain from the first step
    (from a small random start, relations such as "left of" took several times as many steps).
    """
    gh, gw = grid
    half = d_model // 2
    rows = sinusoidal_encoding(gh, half)  # (gh, D/2)
    cols = sinusoidal_encoding(gw, d_model - half)  # (gw, D - D/2)
    table = torch.cat([rows[:, None].expand(gh, gw, half), cols[None].expand(gh, gw, d_model - half)], -1)
    return table.reshape(1, gh * gw, d_model)  # (1, R, D) in row-major order


class PatchRegions(nn.Module):
    """ViT's patch embedding: each P x P patch linearly projected (a stride-P convolution is that
    linear map), plus a learned position per patch (from :func:`grid_positions`).

    Shape: (B, C, H, W) -> (B, R, D), R = (H / P) * (W / P), in row-major grid order.
    """

    def __init__(self, cfg: CaptionerConfig):
        super().__init__()
        self.grid = (cfg.image_size // cfg.patch_size, cfg.image_size // cfg.patch_size)
        self.proj = nn.Conv2d(cfg.channels, cfg.d_model, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.positions = nn.Parameter(grid_positions(self.grid, cfg.d_model))

    def forward(self, images: Tensor) -> Tensor:
        x = self.proj(images)  # (B, D, gh, gw)
        return x.flatten(2).transpose(1, 2) + self.positions  # (B, R, D)


class CNNRegions(nn.Module):
    """A torchvision ResNet up to its last feature map (no pooling, no classifier), each cell
    projected to d_model, plus a learned position per cell.

    Shape: (B, 3, H, W) -> (B, R, D), R = gh * gw cells of the stride-32 feature map.
    """

    def __init__(self, cfg: CaptionerConfig):
        super().__init__()
        try:
            import torchvision  # type: ignore[import-not-found]
        except ImportError:
            raise ConfigError(
                "model.encoder = 'cnn' needs torchvision (pip install torchvision); or use encoder: patches"
            ) from None
        net = getattr(torchvision.models, cfg.cnn)(weights=None)
        if cfg.cnn_weights:
            try:
                net.load_state_dict(_read_weights(cfg.cnn_weights))
            except RuntimeError:  # torch lists every missing, unexpected or misshapen key, over lines
                raise ConfigError(
                    f"model.cnn_weights: {cfg.cnn_weights} does not fit torchvision's {cfg.cnn} (its keys "
                    "or shapes differ: a state dict of that very architecture is needed)"
                ) from None
        self.features = nn.Sequential(*list(net.children())[:-2])  # drop avgpool and fc
        channels, gh, gw = feature_shape(self.features, cfg.image_size)
        self.grid = (gh, gw)
        self.proj = nn.Conv2d(channels, cfg.d_model, kernel_size=1)
        self.positions = nn.Parameter(grid_positions(self.grid, cfg.d_model))

    def forward(self, images: Tensor) -> Tensor:
        x = self.proj(self.features(images))  # (B, D, gh, gw)
        return x.flatten(2).transpose(1, 2) + self.positions  # (B, R, D)


def feature_shape(features: nn.Module, size: int) -> tuple[int, int, int]:
    """(C', gh, gw): the feature map of one 3 x size x size image, probed in eval mode (in train
    mode the probe would move BatchNorm's running statistics, the loaded weights' own); the
    module's mode is restored."""
    training = features.training
    features.eval()
    try:
        with torch.no_grad():
            fmap = features(torch.zeros(1, 3, size, size))  # (1, C', gh, gw)
    finally:
        features.train(training)
    return fmap.size(1), fmap.size(2), fmap.size(3)


def _read_weights(path: str) -> dict[str, Tensor]:
    if not Path(path).is_file():
        raise ConfigError(f"model.cnn_weights: no such file: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # torch's unpickler raises almost anything on a foreign file
        raise ConfigError(f"model.cnn_weights: {path} is not a torch state-dict file") from None


class CaptionTransformer(TargetDecoder):
    """Image regions (patches or a CNN's feature map), a self-attention encoder over them, and the
    Transformer's decoder with cross-attention over the regions.

    Args:
        config: :class:`CaptionerConfig`.
    Shape:
        encode: images (B, C, H, W) in [0, 1] -> memory (B, R, D);
        forward: images, tgt_in (B, T) -> logits (B, T, V).
    """

    config: CaptionerConfig
    mean: Tensor  # (1, C, 1, 1) buffers: the channel statistics images are standardised with
    std: Tensor

    freezable = {
        "embeddings": ("tgt_embed",),
        "encoder": ("regions", "encoder"),
        "decoder": ("decoder_layers", "decoder_norm"),
    }

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.regions: PatchRegions | CNNRegions = (
            PatchRegions(config) if config.encoder == "patches" else CNNRegions(config)
        )
        # the CNN's weights are this model's from here on: a checkpoint needs no weights file
        self.config = dataclasses.replace(config, cnn_weights="") if config.cnn_weights else config
        self.region_dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.tgt_embed = TokenEmbedding(config.tgt_vocab_size, config)
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.decoder_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()
        # tied: logits = h E^T with E the target embedding (section 3.4)
        self.output_proj = nn.Linear(config.d_model, config.tgt_vocab_size, bias=not config.tie_output)
        if config.tie_output:
            self.output_proj.weight = self.tgt_embed.embedding.weight
            self._register_load_state_dict_pre_hook(fill_tied_output("tgt_embed.embedding.weight"))
        rgb = config.channels == 3
        mean = torch.tensor(IMAGENET_MEAN if rgb else (0.5,) * config.channels).view(1, -1, 1, 1)
        std = torch.tensor(IMAGENET_STD if rgb else (0.25,) * config.channels).view(1, -1, 1, 1)
        self.register_buffer("mean", mean, persistent=False)  # (1, C, 1, 1)
        self.register_buffer("std", std, persistent=False)

    @property
    def grid(self) -> tuple[int, int]:
        """(gh, gw): the regions' grid; region r sits at row r // gw, column r % gw."""
        return self.regions.grid

    def encode(self, images: Tensor, *, need_weights: bool = False) -> EncoderOutput:
        """images (B, C, H, W) in [0, 1] -> memory (B, R, D); every region is real (the mask is all True)."""
        C, S = self.config.channels, self.config.image_size
        if images.dim() != 4 or tuple(images.shape[1:]) != (C, S, S):  # the regions' positions fix S
            raise ValueError(f"images must be (B, {C}, {S}, {S}), got shape {tuple(images.shape)}")
        x = (images - self.mean) / self.std
        x = self.region_dropout(self.regions(x))  # (B, R, D)
        memory, weights = self.encoder(x, None, need_weights=need_weights)  # no padding among regions
        B, R = memory.shape[:2]
        mask = torch.ones(B, 1, 1, R, dtype=torch.bool, device=memory.device)  # (B, 1, 1, R)
        return EncoderOutput(memory, mask, weights)

    def forward(self, images: Tensor, tgt_in: Tensor, *, project: bool = True) -> Tensor:
        """Teacher forcing: logits (B, T, V) for every position of tgt_in (B, T) = bos + caption
        (``project=False``: the hidden states (B, T, D) the output layer maps to them)."""
        return self.decode(tgt_in, self.init_state(self.encode(images)), project=project).logits
