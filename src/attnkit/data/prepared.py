"""``attnkit prepare``: a translation corpus tokenized once into memory-mapped arrays on disk.

A run then reads token ids without loading or tokenizing the text, and every DDP rank maps the same
files, so the OS keeps one copy of their pages: a rank keeps only a few arrays of lengths.

The folder (format version :data:`VERSION`)::

    manifest.json              what was prepared, from what, and a SHA-256 of every file below
    tokenizer.src.model        the SentencePiece model (plus tokenizer.tgt.model when not joint)
    train.src.bin, .tgt.bin    token ids of every pair, one flat uint16 (uint32) array per side
    train.src.idx.npy, ...     (N + 1,) int64 offsets into the .bin of each side
    train.lengths.npy          (N, 2) int32 source and target lengths (the sampler reads only these)
    train.corpus.npy           (N,) uint8: 0 = the main corpus, k = data.mix entry k
    valid.*, test.*            the same for the small splits, plus valid.jsonl/test.jsonl (the text,
                               which BLEU needs)

Numpy arrays rather than Arrow (``datasets``): training reads pairs by index in a shuffled order, and
one random read of a mapped ``.bin`` + offsets pair (fairseq's ``MMapIndexedDataset`` layout) costs
~5x less than one of a mapped Arrow table of the same ids, at the same size on disk
(``bench/store_access.py``, docs/BENCHMARKS.md), with nothing beyond numpy. ``attnkit prepare``
(:mod:`attnkit.data.prepare`) writes a folder beside the target and moves it into place only when
complete; a folder that is not attnkit's is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError, DataError
from .pairs import Counts
from .readers import Pair
from .store import PairStore, Side
from .tokenizer import SubwordTokenizer

if TYPE_CHECKING:
    from ..experiment import Experiment

FORMAT, VERSION, MANIFEST = "attnkit-prepared", 1, "manifest.json"
# Settings a run applies when it starts (or that only say where files are): free to differ from the
# folder's. Everything else in data: and tokenizer: decides the folder's content.
RUN_TIME_KEYS = {
    "data": ("prepared", "data_dir", "max_len", "max_len_ratio"),
    "tokenizer": ("sample_nbest", "sample_alpha"),
}


def identity(cfg: Experiment) -> dict:
    """The settings that decide a prepared folder's content; ``data.mix`` weights apply at run time."""
    out = {}
    for section in ("data", "tokenizer"):
        values = getattr(cfg, section).to_dict()
        out[section] = {k: v for k, v in values.items() if k not in RUN_TIME_KEYS[section]}
    out["data"]["mix"] = [{k: v for k, v in e.items() if k != "weight"} for e in out["data"].get("mix", [])]
    return out


def ends_digest(path: Path, span: int = 1 << 20) -> str:
    """SHA-256 of a file's first and last ``span`` bytes: a cheap check that a corpus file is unchanged."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        digest.update(f.read(span))
        f.seek(max(0, path.stat().st_size - span))
        digest.update(f.read(span))
    return digest.hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


# --- reading a prepared folder -------------------------------------------------------------------
@dataclass
class Prepared:
    """A checked prepared folder: its tokenizer, splits (memory-mapped) and validation text."""

    folder: Path
    manifest: dict
    tokenizer: SubwordTokenizer
    train: PairStore
    valid: PairStore
    valid_records: list[Pair]

    def counts(self, split: str) -> Counts:
        dropped = self.manifest["splits"][split]["dropped"]
        return Counts(**{k: int(dropped.get(k, 0)) for k in ("read", "empty", "identical")})


def open_prepared(cfg: Experiment, *, verify: bool = True) -> Prepared:
    """The folder ``data.prepared``, checked against its manifest, the config and the corpus files.

    Every failure is one line naming the problem and the fix (usually: run ``attnkit prepare`` again).
    """
    folder = Path(cfg.data.prepared)
    manifest = read_manifest(folder)
    fix = f"run `attnkit prepare --config ... --output {folder}` again"
    for name, meta in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise DataError(f"{path} is missing from the prepared folder; {fix}")
        if path.stat().st_size != meta["bytes"]:
            raise DataError(
                f"{path} has {path.stat().st_size} bytes, the manifest says {meta['bytes']}: "
                f"truncated or changed; {fix}"
            )
        if verify and sha256(path) != meta["sha256"]:
            raise DataError(f"{path} does not match its SHA-256 in the manifest: the file is damaged; {fix}")
    here = identity(cfg)
    for section in here:
        values = manifest["config"].get(section, {})
        for key in sorted(set(values) | set(here[section])):
            if values.get(key) != here[section].get(key):
                raise ConfigError(
                    f"{folder} was prepared with {section}.{key} = {values.get(key)!r}, this config has "
                    f"{here[section].get(key)!r}; {fix}"
                )
    for stamp in manifest["corpora"]:
        path = Path(stamp["path"])
        if path.is_file() and (
            path.stat().st_size != stamp["bytes"] or ends_digest(path) != stamp["ends_sha256"]
        ):
            raise DataError(f"{path} changed since {folder} was prepared from it; {fix}")
    tok = manifest["tokenizer"]
    protos = [(folder / tok["files"][side]).read_bytes() for side in ("src", "tgt") if side in tok["files"]]
    tokenizer = SubwordTokenizer(protos[0], protos[1] if len(protos) > 1 else None)
    if tokenizer.fingerprint() != tok["fingerprint"]:
        raise DataError(f"{folder}: the tokenizer files differ from the one the shards were made with; {fix}")
    dtype = np.dtype(manifest["dtype"])
    return Prepared(
        folder,
        manifest,
        tokenizer,
        _store(folder, "train", dtype),
        _store(folder, "valid", dtype),
        _records(folder / "valid.jsonl", fix),
    )


def _records(path: Path, fix: str) -> list[Pair]:
    """The (source, target) text of a small split, one JSON pair a line."""
    records: list[Pair] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n")[:-1], start=1):
        try:
            pair = json.loads(line)
        except ValueError:
            pair = None
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise DataError(f"{path}:{number}: not a [source, target] pair; {fix}")
        records.append((pair[0], pair[1]))
    return records


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    if not folder.is_dir():
        raise DataError(f"data.prepared: no such folder: {folder}; create it with `attnkit prepare`")
    if not path.is_file():
        raise DataError(
            f"data.prepared: {folder} has no {MANIFEST}: not a folder written by `attnkit prepare`"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"{path} is not valid JSON ({err}); run `attnkit prepare` again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path} is not an attnkit prepared-data manifest")
    if manifest.get("version") != VERSION:
        raise DataError(
            f"{folder} was prepared in format version {manifest.get('version')}; this attnkit reads version "
            f"{VERSION}: run `attnkit prepare` again"
        )
    _check_schema(manifest, path)
    return manifest


SCHEMA = {"config": dict, "tokenizer": dict, "dtype": str, "splits": dict, "corpora": list, "files": dict}


def _check_schema(manifest: dict, path: Path) -> None:
    """Every key a run reads, of the right type: a hand-edited or foreign manifest is one line."""
    again = "run `attnkit prepare` again"
    for key, kind in SCHEMA.items():
        if not isinstance(manifest.get(key), kind):
            raise DataError(f"{path} has no valid {key!r}; {again}")
    if manifest["dtype"] not in ("uint16", "uint32"):
        raise DataError(f"{path}: unknown id type {manifest['dtype']!r}; {again}")
    tok = manifest["tokenizer"]
    if (
        not isinstance(tok.get("fingerprint"), str)
        or not isinstance(tok.get("files"), dict)
        or "src" not in tok["files"]
    ):
        raise DataError(f"{path}: the tokenizer entry is incomplete; {again}")
    for split in ("train", "valid"):
        entry = manifest["splits"].get(split)
        if not isinstance(entry, dict) or not isinstance(entry.get("dropped"), dict):
            raise DataError(f"{path}: no {split} split; {again}")
    for name, meta in manifest["files"].items():
        if (
            not isinstance(meta, dict)
            or not isinstance(meta.get("bytes"), int)
            or not isinstance(meta.get("sha256"), str)
        ):
            raise DataError(f"{path}: the entry of {name} is incomplete; {again}")
    for stamp in manifest["corpora"]:
        if not isinstance(stamp, dict) or not {"path", "bytes", "ends_sha256"} <= set(stamp):
            raise DataError(f"{path}: a corpus entry is incomplete; {again}")
    # every file a run reads has its checksum: an entry dropped from "files" never turns one off
    unlisted = sorted(set(read_files(manifest)) - set(manifest["files"]))
    if unlisted:
        raise DataError(f"{path} lists no checksum for {', '.join(unlisted[:3])}; {again}")


def read_files(manifest: dict) -> list[str]:
    """Every file of the folder that a run reads."""
    shards = [
        f"{split}.{side}.{ext}"
        for split in ("train", "valid")
        for side in ("src", "tgt")
        for ext in ("bin", "idx.npy")
    ]
    shards += [f"{split}.{name}.npy" for split in ("train", "valid") for name in ("lengths", "corpus")]
    return [*shards, "valid.jsonl", *manifest["tokenizer"]["files"].values()]


def _store(folder: Path, split: str, dtype: np.dtype) -> PairStore:
    sides = []
    for side in ("src", "tgt"):
        path = folder / f"{split}.{side}.bin"
        if path.stat().st_size % dtype.itemsize:
            raise DataError(f"{path} is not a whole number of {dtype} ids; run `attnkit prepare` again")
        # np.memmap cannot map an empty file (no split has one in practice: every pair has text)
        ids: np.ndarray = (
            np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype)
        )
        offsets = np.load(folder / f"{split}.{side}.idx.npy", mmap_mode="r")
        if offsets[-1] != len(ids):
            raise DataError(
                f"{folder}/{split}.{side}.idx.npy does not match {split}.{side}.bin; "
                "run `attnkit prepare` again"
            )
        sides.append(Side(ids, offsets))
    lengths = np.load(folder / f"{split}.lengths.npy", mmap_mode="r")
    corpus = np.load(folder / f"{split}.corpus.npy", mmap_mode="r")
    return PairStore(sides[0], sides[1], corpus, lengths)
