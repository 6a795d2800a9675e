"""Perplexity / bits per token and the classification scores, checked against their definitions and
scikit-learn."""

import math

import pytest
import torch
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_score, recall_score

from attnkit.errors import DataError
from attnkit.tasks.classification import classification_report, plot_confusion_matrix
from attnkit.tasks.language_model import lm_scores


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    V, n = 37, 250
    logits = torch.zeros(n, V)
    nll = torch.nn.functional.cross_entropy(logits, torch.randint(0, V, (n,)), reduction="sum").item()
    s = lm_scores(nll, n)
    assert s.perplexity == pytest.approx(V, rel=1e-5)
    assert s.bits_per_token == pytest.approx(math.log2(V), rel=1e-5)
    assert "perplexity" in s.format()


def test_no_tokens_is_a_data_error():
    with pytest.raises(DataError):
        lm_scores(0.0, 0)


def test_classification_scores_match_scikit_learn():
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(0, 4, (300,), generator=g)
    pred = torch.where(torch.rand(300, generator=g) < 0.6, gold, torch.randint(0, 4, (300,), generator=g))
    pred[pred == 3] = 2  # class 3 never predicted: its precision is 0 by convention
    r = classification_report(gold.tolist(), pred.tolist(), ["de", "en", "fr", "cs"])
    assert r.accuracy == pytest.approx(accuracy_score(gold, pred))
    assert r.macro_f1 == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))
    P = precision_score(gold, pred, average=None, labels=range(4), zero_division=0)
    R = recall_score(gold, pred, average=None, labels=range(4), zero_division=0)
    for c, scores in enumerate(r.per_class):
        assert scores.precision == pytest.approx(P[c]) and scores.recall == pytest.approx(R[c])
    assert r.confusion.tolist() == confusion_matrix(gold, pred, labels=range(4)).tolist()
    assert "macro-F1" in r.format()


def test_bad_class_ids_are_a_data_error():
    with pytest.raises(DataError, match="0..1"):
        classification_report([0, 2], [0, 1], ["a", "b"])
    with pytest.raises(DataError, match="predictions"):
        classification_report([0, 1], [0], ["a", "b"])


def test_confusion_matrix_png(tmp_path):
    r = classification_report([0, 1, 1, 2], [0, 1, 2, 2], ["a", "b", "c"])
    out = plot_confusion_matrix(r, tmp_path / "cm.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
