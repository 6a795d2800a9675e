"""From SentencePiece pieces back to words: the one rule the attention page and the review picture share.

SentencePiece marks the first piece of each word with "▁" (U+2581). A special token (``<s>``,
``</s>``) is a word of its own, and the piece after it starts a new word.
"""

from __future__ import annotations

from collections.abc import Sequence

WORD_START = "\u2581"
SPECIALS = ("<s>", "</s>")


def words(pieces: Sequence[str]) -> tuple[list[str], list[int]]:
    """The words of ``pieces`` and, for each piece, the index of its word."""
    out: list[str] = []
    index: list[int] = []
    for i, piece in enumerate(pieces):
        special = piece in SPECIALS
        if not out or special or piece.startswith(WORD_START) or pieces[i - 1] in SPECIALS:
            out.append(piece if special else piece.removeprefix(WORD_START))
        else:
            out[-1] += piece
        index.append(len(out) - 1)
    return out, index
