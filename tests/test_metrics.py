"""corpus_scores: agrees with sacrebleu, signatures, lowercasing, input errors."""

import pytest
import sacrebleu

from attnkit.errors import DataError
from attnkit.text_scores import Scores, corpus_scores

REFS = [
    "The cat sat on the mat.",
    "A man is riding a bicycle down the street.",
    "Two dogs are playing in the snow.",
]
HYPS = ["The cat sat on a mat.", "A man rides a bike down the street.", "Two dogs play in snow."]


def test_identical_is_100():
    s = corpus_scores(REFS, REFS)
    assert isinstance(s, Scores)
    assert s.bleu == pytest.approx(100.0) and s.chrf == pytest.approx(100.0)
    assert s.bleu_lowercase is None


def test_matches_sacrebleu_functional_api():
    s = corpus_scores(HYPS, REFS)
    assert s.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert 0 < s.bleu < 100


def test_known_value():
    # 4-gram precisions 5/6, 3/5, 2/4, 1/3 on one sentence with no brevity penalty: BLEU = 53.73
    s = corpus_scores(["the cat sat on a mat"], ["the cat sat on the mat"])
    assert s.bleu == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-6)


def test_lowercase_bleu_for_case_only_differences():
    hyps = [r.upper() for r in REFS]
    s = corpus_scores(hyps, REFS, lowercase_bleu=True)
    assert s.bleu_lowercase == pytest.approx(100.0)
    assert s.bleu_lowercase >= s.bleu and s.bleu < 100
    assert "case:mixed" in s.bleu_signature and "case:lc" in s.bleu_lowercase_signature
    assert "nrefs:1" in s.bleu_signature and "chrF" not in s.bleu_signature


def test_format_labels_everything():
    text = corpus_scores(HYPS, REFS, lowercase_bleu=True).format()
    assert "BLEU" in text and "chrF" in text and "lowercased" in text
    assert "case:mixed" in text and "case:lc" in text and "BP =" in text
    assert "lowercased" not in corpus_scores(HYPS, REFS).format()


def test_input_errors():
    with pytest.raises(DataError, match="empty"):
        corpus_scores([], [])
    with pytest.raises(DataError, match="2 hypotheses but 3 references"):
        corpus_scores(HYPS[:2], REFS)
    with pytest.raises(DataError, match="not a string"):
        corpus_scores([[1, 2, 3]], ["a b c"])
