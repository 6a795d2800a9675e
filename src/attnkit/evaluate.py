"""Score a model on a test set: translate the sources, compare with the raw references (sacreBLEU)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DataError
from .metrics import Scores, corpus_scores
from .translate import Translator


@dataclass
class Evaluation:
    scores: Scores
    hypotheses: list[str]


def evaluate(
    translator: Translator,
    sources: list[str],
    references: list[str],
    *,
    beam: int = 4,
    length_penalty: float = 0.6,
    batch_tokens: int = 4000,
    lowercase_bleu: bool = False,
) -> Evaluation:
    """Cased BLEU and chrF of detokenized output against untokenized references (+ lowercased BLEU)."""
    if len(sources) != len(references):  # checked before the (slow) translation, not after
        raise DataError(
            f"{len(sources)} sources but {len(references)} references: they must align line by line"
        )
    if not sources:
        raise DataError("nothing to evaluate: no source sentences")
    if not any(r.strip() for r in references):  # BLEU against nothing is 0 whatever the output
        raise DataError("nothing to evaluate: every reference sentence is empty")
    hyps = translator.translate(sources, beam=beam, length_penalty=length_penalty, batch_tokens=batch_tokens)
    texts = [h.text for h in hyps]
    return Evaluation(corpus_scores(texts, references, lowercase_bleu=lowercase_bleu), texts)
