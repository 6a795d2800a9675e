"""Translation's one evaluation: corpus BLEU, chrF and TER (:mod:`attnkit.text_scores`) of a
model's output.

``evaluate`` is what the trainer's validation and ``attnkit evaluate`` both call, so the BLEU of a
checkpoint on a split is one number whichever asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...decoding.defaults import BEAM, LENGTH_PENALTY
from ...errors import DataError
from ...text_scores import Scores, corpus_scores
from .translator import Translator


@dataclass
class Evaluation:
    scores: Scores
    hypotheses: list[str]


def evaluate(
    translator: Translator,
    sources: list[str],
    *references: list[str],
    beam: int = BEAM,
    length_penalty: float = LENGTH_PENALTY,
    batch_tokens: int = 4000,
    lowercase_bleu: bool = False,
    ter: bool = True,
) -> Evaluation:
    """Cased BLEU, chrF and TER of detokenized output against untokenized references (one list per
    reference set, each aligned with ``sources``), + lowercased BLEU."""
    if not references:
        raise DataError("nothing to evaluate: no references")
    for refs in references:  # checked before the (slow) translation, not after
        if len(sources) != len(refs):
            raise DataError(
                f"{len(sources)} sources but {len(refs)} references: they must align line by line"
            )
    if not sources:
        raise DataError("nothing to evaluate: no source sentences")
    # BLEU against nothing is 0 whatever the output
    if not any(r.strip() for refs in references for r in refs):
        raise DataError("nothing to evaluate: every reference sentence is empty")
    hyps = translator.translate(sources, beam=beam, length_penalty=length_penalty, batch_tokens=batch_tokens)
    texts = [h.text for h in hyps]
    return Evaluation(corpus_scores(texts, *references, lowercase_bleu=lowercase_bleu, ter=ter), texts)
