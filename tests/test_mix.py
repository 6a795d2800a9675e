"""Several training corpora (data.mix): weights per epoch, source tags, and the filters' counts."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from attnkit.checkpoint import load_checkpoint
from attnkit.data import load_multi30k
from attnkit.data.mix import weighted_epochs
from attnkit.data.prepare import prepare
from attnkit.errors import ConfigError
from attnkit.train import build, load_config, train

TINY = [
    "data.max_train_pairs=200",
    "data.max_valid_pairs=10",
    "tokenizer.vocab_size=300",
    "model.preset=tiny",
    "model.share_vocab=true",
    "model.dropout=0.1",
    "model.max_len=256",  # no pair is too long: the counts below are the tags' and filters' alone
    "train.max_tokens=800",
    "train.progress=false",
    "train.max_steps=4",
    "valid.every=4",
    "valid.max_sentences=3",
]


@pytest.fixture(scope="module")
def corpora(shared_data, tmp_path_factory):
    """Main: 200 Multi30k pairs; extra: 40 other pairs (10 of them copies: source == target)."""
    root = tmp_path_factory.mktemp("mix")
    pairs = load_multi30k("train", "de", "en", shared_data, download=False)
    for name, rows in (
        ("main", pairs[:200]),
        ("extra", pairs[500:530] + [(t, t) for _, t in pairs[600:610]]),
    ):
        for k, lang in enumerate(("de", "en")):
            (root / f"{name}.{lang}").write_text("".join(r[k] + "\n" for r in rows), encoding="utf-8")
    for k, lang in enumerate(("de", "en")):
        (root / f"val.{lang}").write_text("".join(r[k] + "\n" for r in pairs[900:910]), encoding="utf-8")
    return root


def config(root, out, *extra):
    return load_config(
        None,
        [
            "data.corpus=files",
            f"data.train_files=[{root / 'main.de'}, {root / 'main.en'}]",
            f"data.valid_files=[{root / 'val.de'}, {root / 'val.en'}]",
            f"data.mix=[{{files: [{root / 'extra.de'}, {root / 'extra.en'}], weight: 2, tag: '<bt>'}}]",
            *TINY,
            f"output_dir={out}",
            *extra,
        ],
    )


def test_weights_repeat_or_subsample_each_corpus_per_epoch():
    corpus = np.array([0] * 10 + [1] * 6 + [2] * 8, dtype=np.uint8)
    epochs = weighted_epochs(corpus, [1.0, 2.0, 0.5], seed=3)
    assert epochs is not None and weighted_epochs(corpus, [1.0, 1.0, 1.0], seed=3) is None
    e0, e1 = epochs(0), epochs(1)
    count = Counter(corpus[e0].tolist())
    assert count == {0: 10, 1: 12, 2: 4}
    assert Counter(e0.tolist())[10] == 2  # every pair of corpus 1 twice
    assert np.array_equal(e0, epochs(0))  # a resumed run re-derives the same epoch
    assert set(e0[corpus[e0] == 2].tolist()) != set(e1[corpus[e1] == 2].tolist())  # another half


def test_a_tagged_corpus_trains_with_its_weight_and_tag(corpora, tmp_path):
    s = build(config(corpora, tmp_path, "data.drop_identical=true"))
    tok = s.tokenizer
    tag = tok.piece_id("<bt>")
    assert "<bt>" in tok.pieces("<bt> Hallo") and tok.id_to_piece(tag) == "<bt>"
    tagged = [i for i in range(len(s.train.examples)) if s.train.examples[i][0][0] == tag]
    assert len(tagged) == 30  # the 10 copies are dropped
    assert any("10 whose source equals the target" in note for note in s.notes), s.notes
    epoch = [i for batch in s.sampler for i in batch]
    assert len(epoch) == len(s.train.examples) + 30 and Counter(epoch)[tagged[0]] == 2


def test_mixed_prepared_data_trains_as_the_corpora_do(corpora, tmp_path):
    cfg = config(corpora, tmp_path / "a", f"data.prepared={tmp_path / 'prep'}", "data.max_len_ratio=1.5")
    manifest = prepare(cfg, cfg.data.prepared, workers=2, log=lambda m: None)
    assert manifest["splits"]["train"]["dropped"] == {"read": 240, "empty": 0, "identical": 0}
    lines: list[str] = []
    a = train(cfg, log=lines.append)
    assert any("(data.max_len_ratio)" in line for line in lines), lines
    b = train(config(corpora, tmp_path / "b", "data.max_len_ratio=1.5"), log=lambda m: None)
    wa, wb = load_checkpoint(a.last_checkpoint)["model"], load_checkpoint(b.last_checkpoint)["model"]
    assert all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)


def test_bad_mix_entries_and_combinations_are_config_errors(corpora, tmp_path):
    for entry, words in (
        ("[{files: [a]}]", "SOURCE, TARGET"),
        ("[{files: [a, b], weight: 0}]", "weight"),
        ("[{tsv: a, files: [a, b]}]", "exactly one"),
        ("[{files: [a, b], tag: 'two words'}]", "tag"),
        ("[{files: [a, b], color: red}]", "unknown"),
    ):
        with pytest.raises(ConfigError, match=words):
            config(corpora, tmp_path, f"data.mix={entry}")
    with pytest.raises(ConfigError, match="bidirectional"):
        build(config(corpora, tmp_path, "train.bidirectional_epochs=1"))
