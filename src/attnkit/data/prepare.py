"""``attnkit prepare``: read the corpora as streams, encode them in worker processes, write the folder.

The folder's format and how a run reads it: :mod:`attnkit.data.prepared`.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, DataError
from ..folders import listing, write_folder
from ..processes import die_with_parent
from ..report import Progress
from . import corpus as c
from . import subword_sampling
from .examples import train_pair_tokenizer
from .mix import mix_entries, tag_ids, tags_of
from .multi30k import multi30k_path
from .pairs import Chunk, Counts, encode_chunk, tokenizer_sample
from .prepared import FORMAT, MANIFEST, VERSION, ends_digest, identity, read_manifest, sha256
from .readers import Pair, iter_parallel, iter_tsv
from .store import id_dtype, offsets_of
from .tokenizer import SubwordTokenizer

if TYPE_CHECKING:
    from ..experiment import Experiment

CHUNK = 10_000  # pairs per worker task: large enough to amortise the transfer, small enough to stream


# --- reading corpora as streams ------------------------------------------------------------------
def spec_files(spec: Any) -> list[Path]:
    """The files a spec reads (to stream them and to notice later changes); [] for a dataset."""
    if isinstance(spec, c.ParallelFilesSpec):
        return [Path(spec.src), Path(spec.tgt)]
    if isinstance(spec, c.TsvSpec):
        return [Path(spec.path)]
    if isinstance(spec, c.Multi30kSpec):
        return [
            multi30k_path(spec.split, lang, spec.data_dir, spec.download)
            for lang in (spec.src_lang, spec.tgt_lang)
        ]
    paths = getattr(spec, "paths", None)
    return [Path(p) for p in paths()] if callable(paths) else []


def stream(spec: Any, limit: int = 0) -> Iterator[Pair]:
    """The pairs of one split, one at a time (a dataset without files is read whole)."""
    files = spec_files(spec)
    if isinstance(spec, c.TsvSpec):
        pairs: Iterator[Pair] = iter_tsv(files[0])
    elif len(files) == 2:  # WMT14's files as published: stray CRs (data.readers.iter_lines)
        pairs = iter_parallel(files[0], files[1], check_cr=not isinstance(spec, c.Wmt14Spec))
    else:
        pairs = iter(spec.load())
    return itertools.islice(pairs, limit or None)


def training_corpora(cfg: Experiment) -> list[tuple[Any, int]]:
    """(spec, record limit) of every training corpus: the data section's own, then ``data.mix``."""
    main = cfg.data.spec("train")
    if main.records != "pairs":
        raise ConfigError(
            f"attnkit prepare: data.corpus {cfg.data.corpus!r} gives {main.records}; "
            "it prepares sentence pairs"
        )
    return [(main, cfg.data.max_train_pairs), *((e.spec, 0) for e in mix_entries(cfg.data.mix))]


# --- encoding in worker processes ----------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _start_worker(parent: int, state: dict) -> None:
    die_with_parent(parent)  # a killed prepare (kill -9 included) leaves no worker behind
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which stops the workers
    _WORKER["tokenizer"] = SubwordTokenizer.from_state_dict(state)


def _encode(job: tuple[list[Pair], int | None, bool]) -> Chunk:
    pairs, tag, drop_identical = job
    return encode_chunk(_WORKER["tokenizer"], pairs, tag_id=tag, drop_identical=drop_identical, threads=1)


class Encoder:
    """Encodes chunks of pairs in ``workers`` processes (in this one when 1), in order, a few at a time."""

    def __init__(self, tokenizer: SubwordTokenizer, workers: int):
        self.tokenizer, self.workers = tokenizer, workers
        self.pool: ProcessPoolExecutor | None = None
        if workers > 1:
            # fork on Linux: a worker starts in milliseconds with the tokenizer's modules loaded (spawn
            # re-imports torch in each); the workers run SentencePiece and numpy only, never torch
            method = "fork" if sys.platform.startswith("linux") else "spawn"
            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_start_worker,
                initargs=(os.getpid(), tokenizer.state_dict()),
            )

    def map(self, pairs: Iterator[Pair], tag: int | None, drop_identical: bool) -> Iterator[Chunk]:
        jobs = ((chunk, tag, drop_identical) for chunk in _batched(pairs, CHUNK))
        if self.pool is None:
            for chunk, _, _ in jobs:
                yield encode_chunk(self.tokenizer, chunk, tag_id=tag, drop_identical=drop_identical)
            return
        pending: list = []  # at most 2 per worker in flight: memory stays bounded on any corpus
        try:
            for job in jobs:
                pending.append(self.pool.submit(_encode, job))
                if len(pending) >= 2 * self.workers:
                    yield pending.pop(0).result()
            for future in pending:
                yield future.result()
        except BrokenProcessPool:
            raise DataError("an encoding worker died (out of memory?); try fewer --workers") from None

    def close(self, *, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)


def _batched(pairs: Iterator[Pair], n: int) -> Iterator[list[Pair]]:
    while chunk := list(itertools.islice(pairs, n)):
        yield chunk


class SplitWriter:
    """Appends encoded chunks of one split to its files."""

    def __init__(self, folder: Path, split: str, dtype: np.dtype):
        self.folder, self.split, self.dtype = folder, split, dtype
        self.bins = {side: open(folder / f"{split}.{side}.bin", "wb") for side in ("src", "tgt")}  # noqa: SIM115
        self.lengths: list[np.ndarray] = []
        self.corpus: list[np.ndarray] = []
        self.counts = Counts()

    def add(self, chunk: Chunk, corpus: int) -> None:
        self.bins["src"].write(chunk.src_ids.astype(self.dtype, copy=False).tobytes())
        self.bins["tgt"].write(chunk.tgt_ids.astype(self.dtype, copy=False).tobytes())
        self.lengths.append(np.stack([chunk.src_len, chunk.tgt_len], axis=1).astype(np.int32))
        self.corpus.append(np.full(len(chunk.src_len), corpus, dtype=np.uint8))
        self.counts.add(chunk)

    def close(self) -> int:
        for f in self.bins.values():
            f.close()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros((0, 2), dtype=np.int32)
        if not len(lengths):
            raise DataError(
                f"the {self.split} split has no sentence pair left ({self.counts.read} read, "
                f"{self.counts.empty} with an empty side, {self.counts.identical} with source = target)"
            )
        np.save(self.folder / f"{self.split}.lengths.npy", lengths)
        np.save(self.folder / f"{self.split}.corpus.npy", np.concatenate(self.corpus))
        for k, side in enumerate(("src", "tgt")):
            np.save(self.folder / f"{self.split}.{side}.idx.npy", offsets_of(lengths[:, k].astype(np.int64)))
        return len(lengths)


# --- prepare -------------------------------------------------------------------------------------
def prepare(
    cfg: Experiment,
    output: str | Path,
    *,
    workers: int = 1,
    log: Callable[[str], None] = print,
    report: bool = False,
) -> dict:
    """Write the prepared folder of ``cfg``'s translation corpus to ``output``; returns its manifest."""
    out = Path(output).resolve()
    _check_replaceable(out)
    held = listing(out)  # replaced only if it still holds this when the new folder is complete
    subword_sampling.check_prepare(cfg)
    corpora = training_corpora(cfg)
    # prepared folders list their files in their manifest: no file list beside it
    with write_folder(out, held, command="prepare", finish=lambda folder: None) as tmp:
        manifest = _write(cfg, corpora, tmp, workers, log, report)
    return manifest


def _write(
    cfg: Experiment, corpora: list, tmp: Path, workers: int, log: Callable[[str], None], report: bool
) -> dict:
    """The folder's files (``report``: the encoding's progress on stderr, :mod:`attnkit.report`)."""
    tokenizer = _tokenizer(cfg, corpora, log)
    files = {"src": "tokenizer.src.model"} | ({} if tokenizer.joint else {"tgt": "tokenizer.tgt.model"})
    for side, name in files.items():
        (tmp / name).write_bytes(tokenizer.state_dict()[side])
    dtype = id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    tags = tag_ids(tokenizer, cfg.data.mix)
    encoder = Encoder(tokenizer, workers)
    splits: dict[str, Any] = {}
    finished = False
    try:
        writer = _encode_train(cfg, corpora, encoder, SplitWriter(tmp, "train", dtype), tags, log, report)
        splits["train"] = {"pairs": writer.close(), "dropped": vars(writer.counts)}
        for which in ("valid", "test"):
            if which == "test" and not cfg.data.has_split("test"):
                continue
            limit = cfg.data.max_valid_pairs if which == "valid" else 0
            records = list(stream(cfg.data.spec(which), limit))
            with open(tmp / f"{which}.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(pair) + "\n" for pair in records)  # ASCII: no line separator inside
            writer = SplitWriter(tmp, which, dtype)
            for chunk in encoder.map(iter(records), None, False):
                writer.add(chunk, 0)
            splits[which] = {"pairs": writer.close(), "dropped": vars(writer.counts)}
        finished = True
    finally:
        encoder.close(cancel=not finished)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "config": identity(cfg),
        "tokenizer": {"fingerprint": tokenizer.fingerprint(), "joint": tokenizer.joint, "files": files},
        "dtype": dtype.name,
        "splits": splits,
        "corpora": [_file_stamp(p) for spec, _ in corpora for p in spec_files(spec)],
        "files": {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in sorted(tmp.iterdir())},
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def _encode_train(cfg: Experiment, corpora: list, encoder, writer, tags, log, report: bool) -> SplitWriter:
    """Every training corpus encoded into ``writer``, in order (``report``: a count, rate and time
    left as it goes: a bar, or a line every 30 s in a log)."""
    for k, (spec, limit) in enumerate(corpora):
        log(f"encoding {spec.describe()} ...")
        progress = (
            Progress(limit or None, f"encoding {spec.describe()}", "pair", every_s=30) if report else None
        )
        for chunk in encoder.map(stream(spec, limit), tags[k], cfg.data.drop_identical):
            read = writer.counts.read
            writer.add(chunk, k)
            if progress:
                progress.step(f"{writer.counts.read:,} pairs read", n=writer.counts.read - read)
        if progress:
            progress.close()
    return writer


def _tokenizer(cfg: Experiment, corpora: list, log: Callable[[str], None]) -> SubwordTokenizer:
    """``train.init_from``'s tokenizer (fine-tuning), ``tokenizer.model``, or SentencePiece trained on (a
    seeded sample of) the non-empty pairs."""
    if cfg.train.init_from:
        from ..checkpoint import load_init

        return SubwordTokenizer.from_state_dict(load_init(cfg)["tokenizer"])
    if cfg.tokenizer.model:
        return SubwordTokenizer.from_files(cfg.tokenizer.model)
    k = cfg.tokenizer.max_sentences // (2 if cfg.tokenizer.joint else 1)

    def nonempty() -> Iterator[Pair]:
        for spec, limit in corpora:
            yield from ((s, t) for s, t in stream(spec, limit) if s.strip() and t.strip())

    sample = list(itertools.islice(nonempty(), k + 1))
    if len(sample) > k:  # more than the sample holds: count them all, then read the drawn ones
        n = sum(1 for _ in nonempty())
        pick = tokenizer_sample(n, k, cfg.train.seed)
        assert pick is not None
        wanted = iter(pick.tolist())
        nxt = next(wanted)
        sample = []
        for i, pair in enumerate(nonempty()):
            if i == nxt:
                sample.append(pair)
                nxt = next(wanted, -1)
                if nxt < 0:
                    break
        log(f"training the tokenizer on {len(sample):,} of {n:,} sentence pairs (tokenizer.max_sentences)")
    return train_pair_tokenizer(sample, cfg.tokenizer, cfg.train.seed, tags_of(cfg.data.mix))


def _check_replaceable(out: Path) -> None:
    """``out`` is new, empty, or an earlier prepared folder holding nothing else: anything else stays."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    refuse = f"--output {out} exists and is not a folder written by attnkit prepare; choose another"
    if not out.is_dir() or not (out / MANIFEST).is_file():
        raise ConfigError(refuse)
    try:
        manifest = read_manifest(out)
    except DataError:
        raise ConfigError(refuse) from None
    extra = sorted({p.name for p in out.iterdir()} - set(manifest["files"]) - {MANIFEST})
    if extra:
        raise ConfigError(
            f"--output {out} holds files attnkit prepare did not write ({', '.join(extra[:3])}); "
            "choose another"
        )


def _file_stamp(path: Path) -> dict:
    """What identifies a corpus file cheaply: its size and a digest of its first and last MiB (a copy
    keeps both, an edit almost surely changes one; the modification time would break on every copy)."""
    return {"path": str(path.resolve()), "bytes": path.stat().st_size, "ends_sha256": ends_digest(path)}
