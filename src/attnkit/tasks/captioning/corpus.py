"""What a captioner reads: ``image<TAB>caption`` lines (``data.corpus: tsv``), image paths relative to
the TSV file, and the images themselves, decoded once.

One format for every source: ``attnkit make-shapes`` writes it, ``attnkit import-captions`` writes
it from a Hugging Face dataset (Flickr30k, COCO ...). An image with several captions has several
lines; each line is a training example, and scoring takes all of an image's captions as its
references.

Legend: N images, C channels, S image size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ...data.config import DataConfig
from ...data.examples import load_records
from ...errors import ConfigError, DataError
from .images import read_image

PRELOAD_BYTES = 1 << 30  # images decoded up front when all of them fit in this much memory


@dataclass(frozen=True)
class CaptionRecord:
    image: str  # the image file's path (resolved against the TSV's folder)
    caption: str


def load_captions(data: DataConfig, which: str) -> list[CaptionRecord]:
    """The records of split ``which`` of a ``tsv`` corpus of ``image<TAB>caption`` lines."""
    if data.corpus != "tsv":
        raise ConfigError(
            f"data.corpus = {data.corpus!r}: a captioner reads a tsv corpus of image<TAB>caption lines "
            "(attnkit make-shapes and attnkit import-captions write one)"
        )
    base = Path(getattr(data, f"{which}_files")[0]).parent
    pairs = load_records(data, which, "pairs")
    return [CaptionRecord(str(base / image), caption) for image, caption in pairs]


def references(records: Sequence[CaptionRecord]) -> tuple[list[str], list[list[str]]]:
    """The distinct images, in first-seen order, and each one's captions (its references)."""
    refs: dict[str, list[str]] = {}
    for r in records:
        refs.setdefault(r.image, []).append(r.caption)
    return list(refs), list(refs.values())


def reference_streams(refs: list[list[str]]) -> list[list[str]]:
    """Per-image caption lists as sacreBLEU's reference streams. An image with fewer captions repeats
    its first: BLEU, chrF and TER take the best (clipped counts, closest length) over an image's
    references, so a repeat changes no score."""
    width = max(len(r) for r in refs)
    return [[r[k] if k < len(r) else r[0] for r in refs] for k in range(width)]


class ImageSet:
    """Images by path as (C, S, S) uint8, decoded once: all up front when they fit in
    ``PRELOAD_BYTES`` (a few thousand small pictures), else each when first read and not kept."""

    def __init__(self, paths: Sequence[str], *, size: int, channels: int):
        self.paths, self.size, self.channels = list(paths), size, channels
        self.pixels: Tensor | None = None  # (N, C, S, S) when preloaded
        if len(self.paths) * channels * size * size <= PRELOAD_BYTES:
            self.pixels = torch.stack([self._read(i) for i in range(len(self.paths))]) if self.paths else None

    def _read(self, i: int) -> Tensor:
        return read_image(self.paths[i], size=self.size, channels=self.channels)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> Tensor:
        return self.pixels[i] if self.pixels is not None else self._read(i)

    def batch(self, index: Sequence[int]) -> Tensor:
        """(B, C, S, S) uint8 of images ``index``."""
        if self.pixels is not None:
            return self.pixels[torch.as_tensor(list(index), dtype=torch.long)]
        return torch.stack([self._read(i) for i in index])


def check_split(records: Sequence[CaptionRecord], split: str) -> None:
    """A split with no records, or a record without caption, is an error naming it."""
    if not records:
        raise DataError(f"the {split} split has no image<TAB>caption lines")
    empty = next((r for r in records if not r.caption.strip()), None)
    if empty is not None:
        raise DataError(f"the {split} split has an empty caption for {empty.image}")
