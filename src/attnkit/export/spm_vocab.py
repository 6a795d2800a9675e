"""Rewrite a foreign SentencePiece model so that attnkit's special ids hold: pad 0, bos 1, eos 2, unk 3.

A piece's id is only its position in the model's piece list; segmentation depends on the pieces'
strings and scores, not on their order. So the pieces can be reordered (specials first) without
changing how any text is split, and pieces that a foreign vocabulary has but the model lacks can
be appended as UNUSED pieces: never produced by encoding, decoded as their own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import CheckpointError

SPECIAL_ROLES = ("pad", "bos", "eos", "unk")  # attnkit ids 0, 1, 2, 3
_DEFAULT_PIECES = {"pad": "<pad>", "bos": "<s>", "eos": "</s>", "unk": "<unk>"}


def _pb():
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        raise CheckpointError(
            "importing a SentencePiece model needs the protobuf package: pip install 'attnkit[export]'"
        ) from None
    return sentencepiece_model_pb2


def reorder_pieces(proto: bytes, extra_pieces: Sequence[str] = ()) -> tuple[bytes, list[str]]:
    """(new serialized model, its pieces in id order). Ids 0-3 are pad, bos, eos, unk (CONTROL and
    UNKNOWN pieces), then the model's other pieces in their old order, then ``extra_pieces``."""
    pb = _pb()
    model = pb.ModelProto()
    try:
        model.ParseFromString(proto)
    except Exception as e:  # protobuf's DecodeError and friends
        raise CheckpointError(f"not a SentencePiece model: {e}") from None
    Piece = pb.ModelProto.SentencePiece
    spec = model.trainer_spec
    names = {
        "pad": spec.pad_piece or _DEFAULT_PIECES["pad"],
        "bos": spec.bos_piece or _DEFAULT_PIECES["bos"],
        "eos": spec.eos_piece or _DEFAULT_PIECES["eos"],
        "unk": spec.unk_piece or _DEFAULT_PIECES["unk"],
    }
    special_names = set(names.values())
    kept = []
    for p in model.pieces:
        if p.type not in (Piece.CONTROL, Piece.UNKNOWN) and p.piece not in special_names:
            kept.append(Piece())
            kept[-1].CopyFrom(p)
    del model.pieces[:]
    for role in SPECIAL_ROLES:
        piece = model.pieces.add()
        piece.piece, piece.score = names[role], 0.0
        piece.type = Piece.UNKNOWN if role == "unk" else Piece.CONTROL
    for p in kept:
        model.pieces.add().CopyFrom(p)
    seen = {p.piece for p in model.pieces}
    for text in extra_pieces:
        if text not in seen:
            piece = model.pieces.add()
            piece.piece, piece.score, piece.type = text, 0.0, Piece.UNUSED
            seen.add(text)
    spec.pad_id, spec.bos_id, spec.eos_id, spec.unk_id = 0, 1, 2, 3
    spec.pad_piece, spec.bos_piece, spec.eos_piece, spec.unk_piece = (names[r] for r in SPECIAL_ROLES)
    return model.SerializeToString(), [p.piece for p in model.pieces]
