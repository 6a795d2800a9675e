"""SentencePiece subword tokenizer that lives inside the checkpoint.

The paper (Section 5.1) encodes WMT En-De with a shared source-target vocabulary of about 37000
byte-pair tokens; here one SentencePiece model is trained for both sides (``joint=True``) or one
per side. The trained models are kept as serialized protos (bytes) so that ``state_dict()`` can be
stored in a checkpoint next to the weights and a checkpoint alone is enough to translate.

Special ids are fixed across attnkit: pad=0, bos=1, eos=2, unk=3. ``encode`` adds no bos/eos
(``attnkit.data.batching.collate`` does); ``decode`` stops at the first eos.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sentencepiece as spm

from attnkit.errors import CheckpointError, ConfigError, DataError

from .sentencepiece_training import BOS_ID, EOS_ID, PAD_ID, UNK_ID, train_model

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID"]  # the special ids, fixed across attnkit
MODEL_TYPES = ("unigram", "bpe")
_STATE_VERSION = 1
_SIDES = ("src", "tgt")


def _check_side(side: str) -> str:
    if side not in _SIDES:
        raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
    return side


@dataclass(frozen=True)
class Vocabulary:
    """The sizes and special ids a model and its batches must agree with: the tokenizer's, only."""

    src_size: int
    tgt_size: int
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def model_fields(self) -> dict[str, int]:
        """Values for the model-config fields of these names (whichever a config has)."""
        return {
            "src_vocab_size": self.src_size,
            "tgt_vocab_size": self.tgt_size,
            "vocab_size": self.tgt_size,
            "pad_id": self.pad_id,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
        }

    @property
    def special_ids(self) -> dict[str, int]:
        """The ids ``collate`` takes."""
        return {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}


class SubwordTokenizer:
    """One joint or two separate (src, tgt) SentencePiece models.

    Build with ``SubwordTokenizer.train(...)`` or ``SubwordTokenizer.from_state_dict(...)``.
    """

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, src_proto: bytes, tgt_proto: bytes | None = None, *, src_eos: bool = False):
        """``tgt_proto=None`` means joint: both sides share ``src_proto``. ``src_eos``: sources end
        with eos (Marian's convention, for imported models; attnkit's own models see no eos)."""
        self.src_eos = bool(src_eos)
        self._protos = {"src": bytes(src_proto), "tgt": None if tgt_proto is None else bytes(tgt_proto)}
        self._sp = {"src": self._load(src_proto, "src")}
        self._sp["tgt"] = self._sp["src"] if tgt_proto is None else self._load(tgt_proto, "tgt")
        self._scores: dict[str, np.ndarray] = {}  # side -> piece log-probabilities, for sample_batch

    @staticmethod
    def _load(proto: bytes, side: str) -> spm.SentencePieceProcessor:
        sp = spm.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(proto)
        except (RuntimeError, TypeError) as err:
            raise CheckpointError(
                f"tokenizer {side} model is not a valid SentencePiece proto: {err}"
            ) from err
        ids = (sp.pad_id(), sp.bos_id(), sp.eos_id(), sp.unk_id())
        if ids != (PAD_ID, BOS_ID, EOS_ID, UNK_ID):
            raise CheckpointError(
                f"tokenizer {side} model has special ids (pad, bos, eos, unk) = {ids}, "
                f"attnkit needs {(PAD_ID, BOS_ID, EOS_ID, UNK_ID)}"
            )
        return sp

    @classmethod
    def train(
        cls,
        src_sentences: Iterable[str],
        tgt_sentences: Iterable[str],
        *,
        vocab_size: int = 8000,
        model_type: str = "unigram",
        joint: bool = True,
        character_coverage: float = 1.0,
        num_threads: int = 4,
        max_sentences: int | None = None,
        seed: int = 0,
        user_symbols: Sequence[str] = (),
    ) -> SubwordTokenizer:
        """Train on raw (untokenized) sentences; deterministic for the same input and arguments.

        Args:
            vocab_size: pieces per model (joint: shared by both sides). An upper bound if the corpus
                is too small to reach it (a warning says what was trained).
            model_type: "unigram" or "bpe".
            joint: one shared model trained on src + tgt, or one model per side.
            character_coverage: fraction of characters covered; 1.0 suits Latin-script languages.
            num_threads: trainer threads; part of the result for unigram, so keep it fixed.
            max_sentences: train on a random subset of this many sentences per model (big corpora).
            seed: seeds that subset.
            user_symbols: pieces every model keeps whole (e.g. corpus tags like ``<bt>``).
        """
        if model_type not in MODEL_TYPES:
            raise ConfigError(f"tokenizer model_type must be one of {MODEL_TYPES}, got {model_type!r}")
        if vocab_size <= UNK_ID + 1:
            raise ConfigError(f"tokenizer vocab_size must be > {UNK_ID + 1}, got {vocab_size}")
        src, tgt = list(src_sentences), list(tgt_sentences)
        for name, sents in (("source", src), ("target", tgt)):
            if not any(s.strip() for s in sents):
                raise DataError(f"cannot train a tokenizer: the {name} corpus is empty")
        train_one = functools.partial(
            train_model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            num_threads=num_threads,
            max_sentences=max_sentences,
            seed=seed,
            user_symbols=tuple(user_symbols),
        )
        if joint:
            return cls(train_one(src + tgt, name="joint"))
        return cls(train_one(src, name="source"), train_one(tgt, name="target"))

    @classmethod
    def from_files(cls, paths: Sequence[str]) -> SubwordTokenizer:
        """Existing SentencePiece model file(s): [joint] or [source, target] (``tokenizer.model``)."""
        protos = []
        for path in paths:
            try:
                with open(path, "rb") as f:
                    protos.append(f.read())
            except OSError as err:
                raise ConfigError(f"tokenizer.model: cannot read {path} ({err.strerror or err})") from None
        try:
            return cls(protos[0], protos[1] if len(protos) > 1 else None)
        except CheckpointError as err:
            raise ConfigError(f"tokenizer.model {', '.join(paths)}: {err}") from None

    def fingerprint(self) -> str:
        """SHA-256 of the model(s) and options: equal exactly when two tokenizers encode alike."""
        digest = hashlib.sha256()
        protos: tuple[bytes, bytes] = (self._protos["src"] or b"", self._protos["tgt"] or b"")
        for proto in protos:
            digest.update(len(proto).to_bytes(8, "little") + proto)
        digest.update(b"src_eos" if self.src_eos else b"")
        return digest.hexdigest()

    # --- vocabulary -------------------------------------------------------------------------------
    @property
    def joint(self) -> bool:
        return self._protos["tgt"] is None

    @property
    def vocabulary(self) -> Vocabulary:
        return Vocabulary(self.src_vocab_size, self.tgt_vocab_size)

    @property
    def src_vocab_size(self) -> int:
        return self._sp["src"].get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._sp["tgt"].get_piece_size()

    # --- text <-> ids -----------------------------------------------------------------------------
    def encode(self, text: str, side: str = "src") -> list[int]:
        """Subword ids of one sentence, without bos/eos (a non-empty source ends with eos when
        ``src_eos``)."""
        return self._end(self._sp[_check_side(side)].encode(text), side)

    def encode_batch(
        self, texts: Sequence[str], side: str = "src", *, threads: int | None = None
    ) -> list[list[int]]:
        """``encode`` of many texts; ``threads``: SentencePiece's (None: its default, every core)."""
        ids = self._sp[_check_side(side)].encode(list(texts), num_threads=threads)
        return [self._end(x, side) for x in ids]

    def sample_batch(
        self,
        texts: Sequence[str],
        side: str = "src",
        *,
        nbest: int,
        alpha: float,
        u: Sequence[float] | np.ndarray,
    ) -> list[list[int]]:
        """Subword regularization (Kudo, 2018): one segmentation per sentence drawn from its ``nbest``
        best ones with probability proportional to P(segmentation)^alpha, where log P is the sum of
        the pieces' unigram log-probabilities; a smaller alpha draws further from the best one.

        ``u``: one uniform number in [0, 1) per text, which picks its draw. The caller owns the
        randomness: SentencePiece's own sampler is seeded per thread and drew otherwise in another
        process with the same seed, which would break exact resume.
        Unigram models only (SentencePiece gives n-best segmentations for nothing else).
        """
        side = _check_side(side)
        if len(u) != len(texts):
            raise ValueError(f"need one uniform per text, got {len(u)} for {len(texts)} texts")
        sp, score = self._sp[side], self._piece_scores(side)  # score: (V,) log-probabilities
        out = []
        for start in range(0, len(texts), 1024):  # n-best lists take ~20 KB a sentence: a chunk at a time
            nbests = sp.nbest_encode(list(texts[start : start + 1024]), nbest_size=nbest)  # best first
            for segs, x in zip(nbests, u[start : start + 1024], strict=True):
                pick = 0
                if len(segs) > 1:
                    sizes = np.fromiter(map(len, segs), dtype=np.int64, count=len(segs))  # (K,)
                    flat = np.fromiter(
                        (i for seg in segs for i in seg), dtype=np.int64, count=int(sizes.sum())
                    )
                    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
                    logp = alpha * np.add.reduceat(score[flat], starts)  # (K,) alpha * log P(segmentation)
                    cdf = np.cumsum(np.exp(logp - logp.max()))
                    pick = min(int(np.searchsorted(cdf, x * cdf[-1], side="right")), len(segs) - 1)
                out.append(self._end(list(segs[pick]) if segs else [], side))
        return out

    def can_sample(self) -> bool:
        """Whether both sides' models give n-best segmentations (unigram models do, BPE ones do not)."""
        try:
            for side in ("src", "tgt"):
                self._sp[side].nbest_encode("a", nbest_size=2)
        except RuntimeError:
            return False
        return True

    def _piece_scores(self, side: str) -> np.ndarray:
        """(V,) unigram log-probability of each piece, read from the model once."""
        if side not in self._scores:
            sp = self._sp[side]
            self._scores[side] = np.array([sp.get_score(i) for i in range(sp.get_piece_size())])
        return self._scores[side]

    def _end(self, ids: list[int], side: str) -> list[int]:
        return ids + [EOS_ID] if ids and self.src_eos and side == "src" else ids

    def decode(self, ids: Sequence[int], side: str = "tgt") -> str:
        """Detokenized text of ``ids`` (a list or 1-D tensor): stops at eos, skips pad and bos."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        kept = []
        for i in ids:
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                kept.append(int(i))
        # A stray word-start piece decodes to a space; sentences never end or start with one.
        return self._sp[_check_side(side)].decode(kept).strip()

    def pieces(self, text: str, side: str = "src") -> list[str]:
        """Subword strings of one sentence (labels for attention maps)."""
        return self._sp[_check_side(side)].encode(text, out_type=str)

    def piece_id(self, piece: str, side: str = "src") -> int:
        return self._sp[_check_side(side)].piece_to_id(piece)

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        return self._sp[_check_side(side)].id_to_piece(int(i))

    # --- serialization ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Plain types and bytes only: survives ``torch.load(weights_only=True)``."""
        state = {
            "version": _STATE_VERSION,
            "joint": self.joint,
            "src": self._protos["src"],
            "tgt": self._protos["tgt"],
        }
        if self.src_eos:  # only imported (Marian) models have it: older attnkit reads the rest unchanged
            state["src_eos"] = True
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> SubwordTokenizer:
        if not isinstance(state, dict) or set(state) - {"src_eos"} != {"version", "joint", "src", "tgt"}:
            keys = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise CheckpointError(
                f"tokenizer state must have keys ['joint', 'src', 'tgt', 'version'], got {keys}"
            )
        if state["version"] != _STATE_VERSION:
            raise CheckpointError(
                f"tokenizer state version {state['version']} is not supported "
                f"(this attnkit reads version {_STATE_VERSION})"
            )
        if not isinstance(state["src"], bytes) or state["joint"] != (state["tgt"] is None):
            raise CheckpointError(
                "tokenizer state is inconsistent: 'src' must be bytes and 'tgt' "
                "must be None exactly when 'joint' is True"
            )
        return cls(state["src"], state["tgt"], src_eos=state.get("src_eos") is True)

    def __repr__(self) -> str:
        if self.joint:
            return f"SubwordTokenizer(joint, vocab={self.src_vocab_size})"
        return f"SubwordTokenizer(src_vocab={self.src_vocab_size}, tgt_vocab={self.tgt_vocab_size})"
