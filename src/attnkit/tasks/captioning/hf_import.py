"""An image-caption dataset from Hugging Face ``datasets`` (Flickr30k, COCO, ...) written in the
captioner's format: ``images/`` and ``{train,valid,test}.tsv`` of ``image<TAB>caption`` lines, as
``attnkit make-shapes`` writes (so one reader serves both).

A dataset is a hub name (read with ``datasets.load_dataset``: needs the network) or a folder written
by ``save_to_disk`` (read offline). Its splits are either its own splits (``splits`` maps each of
ours to one of its split names) or, as Flickr30k keeps them, values of a column of one split
(``split_field``; ``splits`` then maps ours to that column's values). The caption column holds a
caption or a list of them (Flickr30k's five); each caption is a line.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...data.readers import _hf_split
from ...errors import DataError
from ...folders import check_new_folder, write_folder
from .shapes import CORPUS_FILES

SPLITS = {"train": "train", "valid": "validation", "test": "test"}


def _picture(value: Any, where: str):
    """A PIL image from a dataset cell: a decoded ``Image`` feature or its ``{"bytes", "path"}`` dict."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(value, Image.Image):
        return value
    data = value.get("bytes") if isinstance(value, dict) else None
    if data is None and isinstance(value, dict) and value.get("path"):
        data = Path(value["path"]).read_bytes()
    if not isinstance(data, bytes):
        raise DataError(f"{where}: not an image (got {type(value).__name__})")
    try:
        return Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise DataError(f"{where}: not an image") from None


def _captions(value: Any, where: str) -> list[str]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise DataError(
            f"{where}: the caption column holds {type(value).__name__}, not text or a list of text"
        )
    return [" ".join(t.split()) for t in texts if t.strip()]  # one line each: no tabs or newlines inside


def import_captions(
    dataset: str,
    out: str | Path,
    *,
    image_field: str = "image",
    caption_field: str = "caption",
    splits: Mapping[str, str] = SPLITS,
    split_field: str = "",
    hf_split: str = "train",
    size: int = 0,
    max_images: int = 0,
    overwrite: bool = False,
) -> dict[str, Path]:
    """Write ``dataset``'s splits under ``out``; returns each split's TSV path.

    size: images resized to size x size (0 keeps them as they are; the captioner resizes when it
    reads); max_images: at most this many images per split (0 = all). ``out`` must be absent or
    empty (with ``overwrite``, an earlier corpus there is replaced): every split is loaded first,
    then written beside ``out`` and swapped in when all are complete, so a failure leaves ``out``
    as it was.
    """
    out, held = check_new_folder(out, overwrite=overwrite, owned=CORPUS_FILES, command="import-captions")
    columns = (image_field, caption_field, *((split_field,) if split_field else ()))
    whole = _hf_split(dataset, hf_split, columns) if split_field else None
    sources = {}
    for ours, theirs in splits.items():
        if whole is not None:
            rows = whole.filter(lambda v, want=theirs: v == want, input_columns=split_field)
            if len(rows) == 0:
                raise DataError(f"{dataset}: no rows with {split_field} = {theirs!r} (for the {ours} split)")
        else:
            rows = _hf_split(dataset, theirs, columns)
        sources[ours] = rows
    with write_folder(out, held, command="import-captions") as tmp:
        (tmp / "images").mkdir()
        for ours, rows in sources.items():
            lines: list[str] = []
            for i, row in enumerate(rows):
                if max_images and i >= max_images:
                    break
                where = f"{dataset} {ours} row {i + 1}"
                captions = _captions(row[caption_field], where)
                if not captions:
                    continue
                img = _rgb(row[image_field], where, size)
                name = f"images/{ours}_{i:06d}.jpg"
                img.save(tmp / name, format="JPEG", quality=95)
                lines.extend(f"{name}\t{c}\n" for c in captions)
            (tmp / f"{ours}.tsv").write_text("".join(lines), encoding="utf-8")
    return {ours: out / f"{ours}.tsv" for ours in sources}


def _rgb(value: Any, where: str, size: int):
    """The cell's picture decoded in RGB (resized to size x size unless 0); a damaged one is one line."""
    from PIL import Image

    try:
        img = _picture(value, where).convert("RGB")  # decodes: a truncated file fails here
        return img.resize((size, size)) if size else img
    except (OSError, Image.DecompressionBombError) as e:
        raise DataError(f"{where}: a damaged or unreadable image ({e})") from None
