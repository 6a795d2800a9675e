"""Corpus scores of text output against references: BLEU, chrF and TER (sacreBLEU), each with its
signature. Every task that writes text (translations, captions) scores with these.

Scores are only comparable when computed the same way, so each comes with its sacreBLEU signature
(tokenizer, casing, smoothing, version). The paper reports cased, tokenized BLEU on newstest2014;
sacreBLEU's default 13a tokenization on detokenized output is the reproducible modern equivalent.
Lowercased BLEU is optional and always labelled as such. TER (Snover et al., 2006) is an edit rate:
lower is better. Every metric accepts several references per sentence, as sacreBLEU does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF, TER

from .errors import DataError


@dataclass(frozen=True)
class Scores:
    """Corpus-level scores (0-100; TER can pass 100) and the signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str  # sacreBLEU's line: n-gram precisions, brevity penalty, lengths
    ter: float | None = None  # None: not computed (the trainer's validation asks for it only to pick by it)
    ter_signature: str | None = None
    bleu_lowercase: float | None = None
    bleu_lowercase_signature: str | None = None

    def format(self) -> str:
        lines = [
            f"{'BLEU':<16} {self.bleu:6.2f}  {self.bleu_signature}",
            f"{'':<16} {self.bleu_detail}",
            f"{'chrF':<16} {self.chrf:6.2f}  {self.chrf_signature}",
        ]
        if self.ter is not None:
            lines.append(f"{'TER':<16} {self.ter:6.2f}  {self.ter_signature}")
        if self.bleu_lowercase is not None:
            lc = f"{'BLEU lowercased':<16} {self.bleu_lowercase:6.2f}"
            lines.append(f"{lc}  {self.bleu_lowercase_signature}")
        return "\n".join(lines)


def corpus_scores(
    hypotheses: Sequence[str], *references: Sequence[str], lowercase_bleu: bool = False, ter: bool = True
) -> Scores:
    """Score detokenized hypotheses against one or more references each.

    Each of ``references`` holds one reference per hypothesis (sacreBLEU's reference streams).
    ``ter=False`` skips TER: its shift search can take seconds per thousand sentences of poor output.
    """
    hyps, refs = list(hypotheses), [list(r) for r in references]
    if not hyps:
        raise DataError("cannot score an empty list of hypotheses")
    if not refs:
        raise DataError("cannot score without references")
    for stream in refs:
        if len(hyps) != len(stream):
            raise DataError(
                f"{len(hyps)} hypotheses but {len(stream)} references: they must align line by line"
            )
    for name, texts in (("hypothesis", hyps), *(("reference", r) for r in refs)):
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise DataError(f"{name} {bad} is a {type(texts[bad]).__name__}, not a string (decode ids first)")

    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hyps, refs)
    chrf_score = chrf.corpus_score(hyps, refs)
    ter_score = ter_sig = None
    if ter:
        metric = TER()
        ter_score = metric.corpus_score(hyps, refs).score
        ter_sig = str(metric.get_signature())
    lc_score = lc_sig = None
    if lowercase_bleu:
        bleu_lc = BLEU(lowercase=True)
        lc_score = bleu_lc.corpus_score(hyps, refs).score
        lc_sig = str(bleu_lc.get_signature())  # signatures need a scored corpus (nrefs)
    return Scores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_detail=str(bleu_score),
        ter=ter_score,
        ter_signature=ter_sig,
        bleu_lowercase=lc_score,
        bleu_lowercase_signature=lc_sig,
    )
