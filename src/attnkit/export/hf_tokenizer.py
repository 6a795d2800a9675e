"""A Hugging Face fast tokenizer (``tokenizer.json``) that encodes exactly as attnkit's SentencePiece model.

MarianTokenizer always appends ``</s>`` to a source, and attnkit's models never saw one there, so its
default call gives other ids than attnkit's. A ``tokenizers`` pipeline built from the SentencePiece
proto (the same pieces and scores, normalization and whitespace rules) with no post-processor adds
nothing: ``AutoTokenizer.from_pretrained(folder)(text)`` and ``pipeline("translation", folder)`` then
give attnkit's ids without any argument. tests/test_export_hf.py checks the ids on test sentences
and on strings that stress normalization.

Text that looks like a special token (``<s>``, ``</s>``, ``<pad>``, ``<unk>`` in a sentence) is text
to SentencePiece: it never matches a control piece. A Hugging Face tokenizer cuts its special tokens
out of the text first, unless ``split_special_tokens`` is set (the exported config sets it), and a
``tokenizers`` unigram model matches any vocabulary string, control pieces included. So the
pipeline writes ``<`` as a private-use character (:data:`LT`) after normalizing, and its vocabulary
spells ``<`` in ordinary pieces the same way: a control piece, still spelled ``<s>``, is then
beyond reach of any text, and the decoder writes ``<`` back.
"""

from __future__ import annotations

import json
from pathlib import Path

UNIGRAM, BPE = 1, 2  # SentencePiece's TrainerSpec.model_type
NORMAL, USER_DEFINED = 1, 4  # SentencePiece's piece types
LT = "\ue000"  # how "<" is spelled inside the pipeline (module docstring)


def _proto(serialized: bytes):
    from sentencepiece import sentencepiece_model_pb2

    m = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    m.ParseFromString(serialized)
    return m


def convertible(proto: bytes) -> bool:
    """Whether :func:`fast_tokenizer` encodes as this model does: not when it has user-defined
    symbols (``tokenizer.user_symbols``), which SentencePiece cuts out of the normalized text with the
    spaces around them kept as pieces, and a ``tokenizers`` added token cannot; nor when byte
    fallback spells an unknown ``<`` as bytes (the pipeline's :data:`LT` would become other bytes)."""
    m = _proto(proto)
    if m.trainer_spec.byte_fallback and not any(p.piece == "<" for p in m.pieces):
        return False  # "<" as bytes <0x3C>: the pipeline's LT would fall back to other bytes
    return not any(p.type == USER_DEFINED for p in m.pieces)


def fast_tokenizer(proto: bytes):
    """The ``tokenizers.Tokenizer`` of one serialized SentencePiece model (unigram or BPE) without
    user-defined symbols (:func:`convertible`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    m = _proto(proto)
    if not convertible(proto):
        raise ValueError("a SentencePiece model with user-defined symbols has no exact fast tokenizer")
    spec, trainer = m.normalizer_spec, m.trainer_spec
    model: models.Model
    if trainer.model_type == UNIGRAM:
        model = models.Unigram(
            [(_spelled(p), p.score) for p in m.pieces], trainer.unk_id, trainer.byte_fallback
        )
    elif trainer.model_type == BPE:
        model = models.BPE(
            {_spelled(p): i for i, p in enumerate(m.pieces)},
            [(left.replace("<", LT), right.replace("<", LT)) for left, right in _bpe_merges(m.pieces)],
            unk_token=trainer.unk_piece,
            fuse_unk=True,
            byte_fallback=trainer.byte_fallback,
        )
    else:
        raise ValueError(f"SentencePiece model type {trainer.model_type} is neither unigram nor BPE")
    tok = Tokenizer(model)
    steps: list[normalizers.Normalizer] = []
    if spec.precompiled_charsmap:  # the model's Unicode normalization (nmt_nfkc), as compiled into it
        steps.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:  # SentencePiece strips the ends and collapses inner runs of spaces
        steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
    steps.append(normalizers.Replace("<", LT))  # no text reaches a control piece (module docstring)
    tok.normalizer = normalizers.Sequence(steps)
    scheme = "always" if spec.add_dummy_prefix else "never"  # the "▁" before the first word
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace(LT, "<"), decoders.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)]
    )
    return tok


def _spelled(piece) -> str:
    """A piece as the pipeline spells it: ``<`` as :data:`LT` in ordinary pieces, not in control ones."""
    return piece.piece.replace("<", LT) if piece.type == NORMAL else piece.piece


def _bpe_merges(pieces) -> list[tuple[str, str]]:
    """SentencePiece BPE keeps no merge list: a piece is the merge of two pieces, ranked by its score
    (higher first, then by id), which is the order SentencePiece applies them in."""
    normal = {p.piece: (p.score, i) for i, p in enumerate(pieces) if p.type == NORMAL}
    ranked = []
    for piece, (score, i) in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-score, i, left, right))
    return [(left, right) for _, _, left, right in sorted(ranked)]


def write_fast_tokenizer(proto: bytes, folder: Path, specials: dict[str, str]) -> None:
    """Write ``tokenizer.json`` beside the Marian files, and make ``tokenizer_config.json`` name the
    fast tokenizer, so that ``AutoTokenizer`` loads it. ``specials``: unk/pad/eos/bos token -> piece."""
    import transformers

    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=fast_tokenizer(proto), **specials)
    hf.save_pretrained(folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # one name transformers 4 and 5 both load
    config["split_special_tokens"] = True  # "<s>" in a sentence is text, as attnkit encodes it
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
