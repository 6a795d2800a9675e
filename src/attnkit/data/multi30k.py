"""Multi30k (task 1, raw text): where the files live, fetching them once, and reading a split.

Files are kept as published, ``<data_dir>/multi30k/<split>.<lang>.gz``, so a copy made by hand
(on a machine without network) and a downloaded one look the same. Downloads are checked against
the SHA-256 digests below: a truncated or altered file would silently change reported BLEU.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.request
import zlib
from pathlib import Path

from attnkit.data.readers import LabelledExample, Pair, read_parallel, read_text
from attnkit.errors import DataError

LANGS = ("de", "en", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr")
BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
DOWNLOAD_TIMEOUT_S = 30.0

# SHA-256 of the published files (github.com/multi30k/dataset, data/task1/raw/).
SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}


def check_split_langs(split: str, src_lang: str, tgt_lang: str) -> None:
    """Reject a split or language pair Multi30k does not have, listing the valid ones."""
    _check_split(split)
    _check_lang(src_lang, "source")
    _check_lang(tgt_lang, "target")
    if src_lang == tgt_lang:
        raise DataError(f"source and target language are both {src_lang!r}; choose two different ones")


def check_split_lang(split: str, lang: str) -> None:
    """Reject a split or language Multi30k does not have (a monolingual corpus)."""
    _check_split(split)
    _check_lang(lang)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise DataError(f"unknown Multi30k split {split!r}; choose one of {', '.join(SPLITS)}")


def _check_lang(lang: str, side: str = "") -> None:
    if lang not in LANGS:
        what = f"{side} language" if side else "language"
        raise DataError(f"unknown Multi30k {what} {lang!r}; choose one of {', '.join(LANGS)}")


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The data root: ``data_dir`` if given, else ``$ATTNKIT_DATA``, else the user cache.

    The cache is ``$XDG_CACHE_HOME/attnkit`` (``~/.cache/attnkit`` when unset), so downloads
    survive between runs without cluttering the working directory.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get("ATTNKIT_DATA")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / "attnkit"


def multi30k_path(
    split: str,
    lang: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    base_url: str | None = None,
    checksums: dict[str, str] | None = None,
) -> Path:
    """The local ``<split>.<lang>.gz``, downloaded and verified first if it is missing.

    Args:
        base_url: where to fetch from; ends with ``/``.
        checksums: file name -> SHA-256 hex digest; defaults to :data:`SHA256`. Tests pass their
            own table for the small files they serve.
    """
    _check_split(split)
    _check_lang(lang)
    root = resolve_data_dir(data_dir)
    name = f"{split}.{lang}.gz"
    path = root / "multi30k" / name
    if path.is_file():
        return path
    if not download:
        raise DataError(f"no such file: {path}. {_where_to_put(root)}")
    table = SHA256 if checksums is None else checksums
    if name not in table:
        raise DataError(f"no SHA-256 digest known for {name}; refusing to download it unverified")
    _download((base_url or BASE_URL) + name, path, table[name], root)
    return path


def load_multi30k(
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
) -> list[Pair]:
    """Aligned (source, target) sentence pairs of one split, e.g. ``("train", "de", "en")``."""
    check_split_langs(split, src_lang, tgt_lang)
    src = multi30k_path(split, src_lang, data_dir, download)
    tgt = multi30k_path(split, tgt_lang, data_dir, download)
    return read_parallel(src, tgt)


def load_multi30k_text(
    split: str, lang: str, data_dir: str | os.PathLike | None = None, download: bool = True
) -> list[str]:
    """The sentences of one split in one language (a monolingual corpus, e.g. for a language model)."""
    return read_text(multi30k_path(split, lang, data_dir, download))


def check_langid_langs(langs: tuple[str, ...]) -> None:
    """Language identification needs two or more distinct Multi30k languages."""
    for lang in langs:
        _check_lang(lang)
    if len(set(langs)) != len(langs) or len(langs) < 2:
        raise DataError(
            f"language identification needs 2 or more different languages, got {', '.join(langs)}"
        )


def load_multi30k_langid(
    split: str,
    langs: tuple[str, ...] = LANGS,
    first_words: int = 0,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    labels: tuple[str, ...] = (),
) -> list[LabelledExample]:
    """Language identification: every caption of ``split`` in each of ``langs``, labelled with its language.

    The languages are interleaved (caption 1 in each language, then caption 2, ...), so the first N
    examples hold every class. ``first_words``: keep each caption's first N words (0 = all of it), the
    harder task. ``labels``: the training split's classes; a language outside them is an error.
    """
    _check_split(split)
    check_langid_langs(langs)
    unknown = [lang for lang in langs if labels and lang not in labels]
    if unknown:
        raise DataError(f"language {unknown[0]!r} is not a class of the training split ({', '.join(labels)})")
    columns = [read_text(multi30k_path(split, lang, data_dir, download)) for lang in langs]
    examples = []
    for captions in zip(*columns, strict=True):  # Multi30k's languages align line by line
        for lang, caption in zip(langs, captions, strict=True):
            words = caption.split()
            if words:
                examples.append(
                    LabelledExample(lang, " ".join(words[:first_words] if first_words else words))
                )
    return examples


def _where_to_put(root: Path) -> str:
    return (
        f"Put the Multi30k files at {root / 'multi30k'}/<split>.<lang>.gz "
        f"(splits: {', '.join(SPLITS)}; languages: {', '.join(LANGS)}; from {BASE_URL}), "
        "or choose another directory with --data-dir or the ATTNKIT_DATA environment variable."
    )


def _download(url: str, path: Path, sha256: str, root: Path) -> None:
    """Fetch ``url`` into ``path`` via a temp file beside it, renamed only once verified.

    The rename is atomic, so an interrupted or corrupt download never leaves a file that a later
    run would take for a good copy.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError as exc:
        raise DataError(
            f"cannot write to {path.parent} ({exc.strerror or exc}). {_where_to_put(root)}"
        ) from exc
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        try:
            with (
                os.fdopen(fd, "wb") as out,
                urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp,
            ):
                while chunk := resp.read(1 << 16):
                    digest.update(chunk)
                    out.write(chunk)
        except (OSError, http.client.HTTPException) as exc:  # HTTP status, refused, DNS, timeout, cut off
            reason = getattr(exc, "reason", None) or exc
            raise DataError(f"download of {url} failed ({reason}). {_where_to_put(root)}") from exc
        if digest.hexdigest() != sha256:
            raise DataError(
                f"download of {url} is corrupt: SHA-256 {digest.hexdigest()}, expected {sha256}; "
                f"nothing was saved. {_where_to_put(root)}"
            )
        _check_gzip(tmp, url)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_gzip(path: Path, url: str) -> None:
    """Decompress the whole file once: a digest can match a table entry that is itself wrong."""
    try:
        with gzip.open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"download of {url} is not a valid gzip file ({exc}); nothing was saved") from exc
