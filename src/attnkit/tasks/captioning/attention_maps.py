"""Where each word of a caption looked: its cross-attention over the image's regions.

``caption_attention`` captions an image, then ``attention_of`` re-runs the decoder on that caption's
own tokens with the weights returned (as translation's attention maps do): every layer and head, one
row per produced piece and eos, one column per region. ``region_mass`` measures how much of a word's
attention falls on a box of the image (an object's, in the generated corpus): the number the seed's
picture shows.

Legend: L layers, H heads, T produced pieces + eos, R = gh * gw regions, S image size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...decoding.defaults import BEAM
from .captioner import Captioner, Image
from .images import as_floats


@dataclass
class CaptionAttention:
    """One image's caption and every cross-attention of it.

    cross (L, H, T, R); ``image`` (C, S, S) uint8 is what the model read; region r covers grid
    cell (r // gw, r % gw) of the image; ``encoder_self`` (L', H, R, R) the encoder's self-attention
    over the regions (None for a captioner whose regions go to the decoder as they are).
    """

    caption: str
    pieces: list[str]
    cross: Tensor
    grid: tuple[int, int]
    image: Tensor
    encoder_self: Tensor | None = None


def caption_attention(
    captioner: Captioner, image: Image, *, beam: int = BEAM, name: str | None = None, **options: Any
) -> CaptionAttention:
    """Caption ``image`` (``options``: the rest of :meth:`Captioner.caption`'s search options), then
    re-run the decoder on its caption with the weights returned."""
    pixels = captioner.read(image, name=name)  # (C, S, S)
    (found,) = captioner.caption([pixels], beam=beam, **options)
    cross = attention_of(captioner, pixels, found.tokens)  # (L, H, T, R)
    encoder = encoder_attention(captioner, pixels)
    return CaptionAttention(found.text, found.pieces, cross, captioner.model.grid, pixels.cpu(), encoder)


def encoder_attention(captioner: Captioner, pixels: Tensor) -> Tensor | None:
    """(L, H, R, R) the encoder's self-attention over the regions of ``pixels`` (C, S, S) uint8, or
    None when the captioner has no encoder layers."""
    with torch.no_grad():
        weights = captioner.model.encode(as_floats(pixels[None].to(captioner.device)), need_weights=True)
    if not weights.self_attn:
        return None
    return torch.stack([w[0] for w in weights.self_attn]).float().cpu()


def attention_of(captioner: Captioner, pixels: Tensor, tokens: list[int]) -> Tensor:
    """(L, H, T, R) every cross-attention of caption ``tokens`` (ids without bos or eos) of the image
    ``pixels`` (C, S, S) uint8, teacher-forced: row t is the step that produced piece t (the last, eos)."""
    model, device = captioner.model, captioner.device
    tgt_in = torch.tensor([[model.config.bos_id, *tokens]], device=device)  # (1, T)
    with torch.no_grad():
        enc = model.encode(as_floats(pixels[None].to(device)))  # (1, R, D)
        out = model.decode(tgt_in, model.init_state(enc), need_weights=True)
    assert out.cross_attn is not None  # asked for with need_weights
    return torch.stack([w[0] for w in out.cross_attn]).float().cpu()  # (L, H, T, R)


def region_boxes(grid: tuple[int, int], size: int) -> Tensor:
    """(R, 4) each region's pixel box x0, y0, x1, y1 (exclusive ends) in an S x S image."""
    gh, gw = grid
    r = torch.arange(gh * gw)
    row, col = r // gw, r % gw
    return torch.stack([col * size / gw, row * size / gh, (col + 1) * size / gw, (row + 1) * size / gh], 1)


def region_mass(weights: Tensor, box: tuple[int, int, int, int], grid: tuple[int, int], size: int) -> float:
    """The attention mass (weights (R,) over regions) on the regions that overlap ``box`` (x0, y0,
    x1, y1 inclusive pixels): 1.0 when the word looks only at the object, about the box's share of
    the image when it looks everywhere alike."""
    cells = region_boxes(grid, size)  # (R, 4)
    x0, y0, x1, y1 = box
    overlaps = (cells[:, 0] <= x1) & (cells[:, 2] > x0) & (cells[:, 1] <= y1) & (cells[:, 3] > y0)  # (R,)
    return float(weights[overlaps].sum())
