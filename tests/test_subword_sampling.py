"""Subword regularization (tokenizer.sample_nbest): draws that keep the text, come from the seed
alone (in any process, so resuming stays exact), change each epoch, and are refused where they
cannot work."""

import gzip
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.data.subword_sampling import SampledPairs
from attnkit.data.tokenizer import SubwordTokenizer
from attnkit.errors import ConfigError
from attnkit.train import build, load_config, train
from test_train import straight_and_resumed, tiny_config  # noqa: F401  (tiny_config: a fixture)


def _lines(shared_data, lang, start, n):
    with gzip.open(shared_data / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
        return [line.strip() for line in f][start : start + n]


@pytest.fixture(scope="module")
def tok(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small corpus may not reach vocab_size
        return SubwordTokenizer.train(
            _lines(shared_data, "en", 0, 500), _lines(shared_data, "de", 0, 500), vocab_size=500, joint=True
        )


@pytest.fixture(scope="module")
def texts(shared_data):
    return _lines(shared_data, "en", 500, 60)


def draw(tok, texts, seed, *, nbest=64, alpha=0.1, side="src"):
    u = np.random.default_rng(seed).random(len(texts))
    return tok.sample_batch(texts, side, nbest=nbest, alpha=alpha, u=u)


def test_every_draw_is_a_segmentation_of_the_same_text(tok, texts):
    drawn, best = draw(tok, texts, 0), tok.encode_batch(texts, side="src")
    assert [tok.decode(ids, side="src") for ids in drawn] == [tok.decode(ids, side="src") for ids in best]
    changed = sum(d != b for d, b in zip(drawn, best))
    assert changed > len(texts) // 2  # alpha 0.1 over 64 candidates: most sentences move
    assert sum(map(len, drawn)) > sum(map(len, best))  # the best segmentation is among the shortest


def test_the_same_seed_draws_the_same_and_another_seed_draws_otherwise(tok, texts):
    assert draw(tok, texts, 7) == draw(tok, texts, 7)
    assert draw(tok, texts, 7) != draw(tok, texts, 8)


def test_a_large_alpha_draws_the_best_segmentation(tok, texts):
    assert draw(tok, texts, 0, alpha=1000.0) == tok.encode_batch(texts, side="src")


def test_draws_follow_p_to_the_alpha(tok):
    """Each uniform picks the segmentation whose slice of the P^alpha cdf holds it."""
    text, alpha = "A skateboarder performs tricks.", 0.5
    segs = tok._sp["src"].nbest_encode(text, nbest_size=8)
    score = tok._piece_scores("src")
    w = np.exp(alpha * np.array([score[seg].sum() for seg in segs]))
    cdf = np.cumsum(w / w.sum())
    u = np.linspace(0.0005, 0.9995, 1000)
    drawn = tok.sample_batch([text] * len(u), "src", nbest=8, alpha=alpha, u=u)
    expected = [segs[int(np.searchsorted(cdf, x, side="right"))] for x in u]
    assert drawn == expected and len({tuple(d) for d in drawn}) >= 3  # not just the best one


def test_a_separate_target_vocabulary_draws_with_its_own_model(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sep = SubwordTokenizer.train(
            _lines(shared_data, "en", 0, 300), _lines(shared_data, "de", 0, 300), vocab_size=300, joint=False
        )
    de = _lines(shared_data, "de", 300, 20)
    drawn = sep.sample_batch(de, "tgt", nbest=16, alpha=0.1, u=np.random.default_rng(0).random(len(de)))
    assert [sep.decode(d, side="tgt") for d in drawn] == [
        sep.decode(b, side="tgt") for b in sep.encode_batch(de, "tgt")
    ]
    assert drawn != sep.encode_batch(de, "tgt")


def test_another_process_draws_the_same(tok, texts):
    """SentencePiece's own sampler gave other draws in another process with the same seed."""
    script = (
        "import sys, pickle, numpy as np\n"
        "from attnkit.data.tokenizer import SubwordTokenizer\n"
        "state, texts = pickle.load(sys.stdin.buffer)\n"
        "tok = SubwordTokenizer.from_state_dict(state)\n"
        "u = np.random.default_rng(5).random(len(texts))\n"
        "out = tok.sample_batch(texts, 'src', nbest=64, alpha=0.1, u=u)\n"
        "sys.stdout.buffer.write(pickle.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps((tok.state_dict(), texts)),
        capture_output=True,
        check=True,
    )
    assert pickle.loads(done.stdout) == draw(tok, texts, 5)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["tokenizer.sample_nbest=1"], "sample_nbest"),
        (["tokenizer.sample_nbest=8", "tokenizer.sample_alpha=0"], "sample_alpha"),
        (["tokenizer.sample_nbest=8", "tokenizer.model_type=bpe"], "unigram"),
    ],
)
def test_bad_sampling_settings_are_refused(tmp_path, tiny_config, overrides, match):  # noqa: F811
    with pytest.raises(ConfigError, match=match):
        tiny_config(tmp_path, *overrides)


def test_a_language_model_refuses_sampling(tmp_path, shared_data):
    overrides = ["model.arch=lm", "data.lang=en", "tokenizer.sample_nbest=8", "data.max_train_pairs=50"]
    cfg = load_config(None, [f"data.data_dir={shared_data}", f"output_dir={tmp_path}", *overrides])
    with pytest.raises(ConfigError, match="sample_nbest"):
        build(cfg)


def test_each_epoch_trains_on_its_own_draw(tmp_path, tiny_config):  # noqa: F811
    setup = build(tiny_config(tmp_path, "tokenizer.sample_nbest=16"))
    task, tok = setup.task, setup.tokenizer
    first = list(task.epoch_examples(setup.train, tok, 0))
    assert (
        list(reversed([task.epoch_examples(setup.train, tok, 0)[i] for i in range(len(first) - 1, -1, -1)]))
        == first
    )
    second = list(task.epoch_examples(setup.train, tok, 1))  # example i's draw: (seed, epoch, i), any order
    assert len(first) == len(second) == len(setup.train.examples)
    assert first != second and first != setup.train.examples
    decode = setup.tokenizer.decode
    assert [decode(t) for _, t in second] == [decode(t) for _, t in setup.train.examples]
    plain = build(tiny_config(tmp_path / "plain"))
    assert plain.task.epoch_examples(plain.train, plain.tokenizer, 3) is plain.train.examples


def test_a_long_draw_keeps_the_best_segmentation(tmp_path, tiny_config):  # noqa: F811
    setup = build(tiny_config(tmp_path, "tokenizer.sample_nbest=64", "tokenizer.sample_alpha=0.01"))
    corpus, max_len = setup.train.corpus
    longest = max(range(len(corpus.examples)), key=lambda i: len(corpus.examples[i][1]))
    n = len(corpus.examples[longest][1])
    short = SampledPairs(
        corpus, setup.tokenizer, n, nbest=64, alpha=0.01, seed=(0, 0)
    )  # every longer draw refused
    assert short[longest] == corpus.examples[longest]
    free = SampledPairs(corpus, setup.tokenizer, max_len + 100, nbest=64, alpha=0.01, seed=(0, 0))
    assert len(free[longest][1]) > n


def test_resuming_a_bpe_run_with_sampling_is_refused(tmp_path, tiny_config):  # noqa: F811
    run = train(
        tiny_config(tmp_path, "tokenizer.model_type=bpe", "train.max_steps=2", "valid.every=2"),
        log=lambda m: None,
    )
    with pytest.raises(ConfigError, match="n-best"):
        build(
            tiny_config(tmp_path, "train.max_steps=4", "tokenizer.sample_nbest=8"), resume=run.last_checkpoint
        )


@pytest.mark.parametrize("accumulate", [1, 2])
@pytest.mark.slow
def test_resume_with_sampling_continues_exactly_across_epochs(tmp_path, tiny_config, accumulate):  # noqa: F811
    """8 steps straight == 4 steps, stop, resume, 4 more; the run crosses into a new epoch's draw."""
    common = ["model.dropout=0.1", "valid.every=4", "train.max_tokens=2000", f"train.accumulate={accumulate}"]
    common.append("tokenizer.sample_nbest=16")
    a, _ = straight_and_resumed(tiny_config, tmp_path, common)
    assert a["sampler"]["epoch"] >= 1
    plain = train(tiny_config(tmp_path / "c", *common[:-1], "train.max_steps=8"), log=lambda m: None)
    c = load_checkpoint(plain.last_checkpoint)
    assert not all(torch.equal(t, c["model"][n]) for n, t in a["model"].items())  # sampling changed training
