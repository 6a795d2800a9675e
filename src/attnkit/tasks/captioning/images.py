"""Reading an image for the captioner: checked, converted to RGB (or grey) and resized to the model's size.

Training, ``attnkit caption``, ``attnkit attention`` and the server read images through here, so a
file means the same pixels to each, and a bad one is the same one-line :class:`DataError`
everywhere (exit code 2 on the command line, 4xx from the server): not an image, too large, a
pixel mode that is not a picture (16-bit, float, CMYK scans ...).

Legend: C channels, S the model's image size (S x S pixels).
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import torch
from torch import Tensor

from ...errors import DataError

MAX_BYTES = 20_000_000  # a file larger than this is refused before it is decoded
MAX_PIXELS = 40_000_000  # width x height; PIL's own decompression-bomb guard is ~89M
MODES = ("RGB", "RGBA", "L", "LA", "P", "1")  # pixel modes that convert to RGB as a picture

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

ImageSource: TypeAlias = "str | Path | bytes | PILImage"  # a file, its bytes, or a PIL image


def _describe(source: ImageSource, name: str | None) -> str:
    from PIL import Image

    if isinstance(source, Image.Image):
        return name or f"a {source.width}x{source.height} PIL image"
    return name or (f"{len(source):,}-byte upload" if isinstance(source, bytes) else str(source))


def read_image(
    source: ImageSource,
    *,
    size: int,
    channels: int = 3,
    name: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_pixels: int = MAX_PIXELS,
) -> Tensor:
    """An image file, its bytes or a PIL image -> (C, S, S) uint8, resized (bilinear) to ``size`` x ``size``.

    ``name`` names the image in errors (default: the path, or the upload's size).
    """
    from PIL import Image

    what = _describe(source, name)
    if isinstance(source, Image.Image):
        img = _checked(source, what, max_pixels)
    else:
        img = _opened(_read_bytes(source, what, max_bytes), what, max_pixels)
    picture = img.convert("RGB" if channels == 3 else "L")
    if picture.size != (size, size):
        picture = picture.resize((size, size), Image.Resampling.BILINEAR)
    pixels = np.asarray(picture, dtype=np.uint8).reshape(size, size, channels)  # (S, S, C)
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)  # (C, S, S)


def as_floats(images: Tensor) -> Tensor:
    """uint8 pixels (B, C, S, S) -> floats in [0, 1], what the model's ``encode`` reads."""
    return images.float() / 255.0


def _read_bytes(source: str | Path | bytes, what: str, max_bytes: int) -> bytes:
    if isinstance(source, bytes):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise DataError(f"{what}: no such image file")
        if path.stat().st_size > max_bytes:
            raise DataError(f"{what}: the file is over {max_bytes:,} bytes; too large an image")
        data = path.read_bytes()
    if len(data) > max_bytes:
        raise DataError(f"{what}: {len(data):,} bytes is over {max_bytes:,}; too large an image")
    return data


def _checked(img, what: str, max_pixels: int):
    """``img`` if its size and pixel mode are ones a model reads, else one DataError naming them."""
    width, height = img.size
    if width * height > max_pixels:
        raise DataError(f"{what}: {width}x{height} pixels is over {max_pixels:,}; too large an image")
    if img.mode not in MODES:
        raise DataError(
            f"{what}: pixel mode {img.mode} is not a picture this model reads "
            f"(it reads {', '.join(MODES)}); convert it to RGB first"
        )
    return img


def _opened(data: bytes, what: str, max_pixels: int):
    """The decoded image of ``data``: its header checked before its pixels are decoded."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = _checked(Image.open(io.BytesIO(data)), what, max_pixels)  # reads the header only
            img.load()
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise DataError(f"{what}: not an image (or one too large to decode)") from None
    except (OSError, SyntaxError, ValueError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"{what}: a damaged or truncated image") from None
    return img
