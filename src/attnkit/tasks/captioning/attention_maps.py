"""Where each word of a caption looked: its cross-attention over the image's regions.

``caption_attention`` captions an image, then :meth:`~.captioner.Captioner.attention_of` re-runs the
decoder on that caption's own tokens with the weights returned (as translation's attention maps
do): every layer and head, one row per produced piece and eos, one column per region.
``region_mass`` measures how much of a word's attention falls on a box of the image (an object's,
in the generated corpus): the number the seed's picture shows.

Legend: L layers, H heads, T produced pieces + eos, R = gh * gw regions, S image size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...decoding.defaults import BEAM
from .captioner import Captioner, Image


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
    cross = captioner.attention_of(pixels, found.tokens)  # (L, H, T, R)
    encoder = captioner.encoder_attention(pixels)
    return CaptionAttention(found.text, found.pieces, cross, captioner.model.grid, pixels.cpu(), encoder)


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
