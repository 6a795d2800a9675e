"""Captioning's metrics and its one evaluation: corpus BLEU (and chrF) of a captioner's captions
against every reference caption of each image, with sacreBLEU as translation scores.

``evaluate`` is what the trainer's validation and ``attnkit evaluate`` both call, so a checkpoint's
caption BLEU on a split is one number whichever asks. CIDEr, the captioning papers' metric, is not
computed: no well-kept installed package provides it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...decoding.defaults import BEAM, LENGTH_PENALTY
from ...errors import DataError
from ...text_scores import Scores, corpus_scores
from .captioner import Captioner, Image
from .corpus import reference_streams


@dataclass
class CaptionEvaluation:
    scores: Scores
    captions: list[str]  # one per image, in order


def evaluate(
    captioner: Captioner,
    images: Sequence[Image],
    refs: Sequence[Sequence[str]],
    *,
    beam: int = BEAM,
    length_penalty: float = LENGTH_PENALTY,
    batch_size: int = 32,
) -> CaptionEvaluation:
    """Caption ``images`` and score them against ``refs`` (each image's reference captions)."""
    if len(images) != len(refs):
        raise DataError(f"{len(images)} images but {len(refs)} reference lists: one per image")
    if not images:
        raise DataError("nothing to evaluate: no images")
    if any(not r for r in refs):
        raise DataError("every image needs at least one reference caption")
    found = captioner.caption(images, beam=beam, length_penalty=length_penalty, batch_size=batch_size)
    texts = [c.text for c in found]
    streams = reference_streams([list(r) for r in refs])
    return CaptionEvaluation(corpus_scores(texts, *streams, ter=False), texts)
