"""The baselines' own code: the indexed Kneser-Ney scores exactly as nltk's, the LM scoring counts
every piece and the end of sentence, the language identifier learns a toy task."""

import itertools
import math
import random

import pytest

ngram_lm = pytest.importorskip("bench.ngram_lm")
langid_baseline = pytest.importorskip("bench.langid_baseline")


def toy_sentences(n=200, seed=0):
    rng = random.Random(seed)
    return [[rng.choice("abcdefg") for _ in range(rng.randint(1, 8))] for _ in range(n)]


@pytest.mark.parametrize("order", [2, 3, 4])
def test_indexed_kneser_ney_scores_exactly_as_nltk(order):
    from nltk.lm import KneserNeyInterpolated
    from nltk.lm.preprocessing import padded_everygram_pipeline

    sents = toy_sentences()
    reference = KneserNeyInterpolated(order, discount=0.7)
    reference.fit(*padded_everygram_pipeline(order, sents))
    lm = ngram_lm.fit(sents, order, 0.7)
    for context in itertools.islice(itertools.product(["<s>", *"abcdefgh"], repeat=order - 1), 300):
        for word in [*"abcdefg", "</s>"]:
            assert lm.score(word, list(context)) == reference.score(word, list(context))


def test_scoring_counts_each_piece_and_the_end_of_sentence():
    sents = toy_sentences()
    lm = ngram_lm.fit(sents, 3, 0.75)
    out = ngram_lm.score(lm, sents[:10])
    assert out["tokens"] == sum(len(s) + 1 for s in sents[:10])
    assert out["floored"] == 0
    # a model of 7 letters + </s> must beat the uniform model on its own training data
    assert 1.0 < out["perplexity"] < 8.0
    assert math.isclose(out["perplexity"], math.exp(out["nll"] / out["tokens"]))


def test_langid_pipeline_separates_two_toy_languages():
    train = ["the cat is here", "the dog is there", "der Hund ist da", "die Katze ist hier"] * 5
    labels = [0, 0, 1, 1] * 5
    model = langid_baseline.build_model().fit(train, labels)
    assert model.predict(["the cat", "die Katze"]).tolist() == [0, 1]
    assert langid_baseline.first_words("a b c d e", 3) == "a b c"
