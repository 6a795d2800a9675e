"""Bidirectional training (train.bidirectional_epochs): the first epochs read every pair both ways,
later ones the source -> target pairs alone; resuming across the change is exact; refused where a
reversed pair means nothing."""

import numpy as np
import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.data.bidirectional import BidirectionalPairs
from attnkit.errors import ConfigError
from attnkit.train import build, load_config, train
from test_train import straight_and_resumed, tiny_config  # noqa: F401  (tiny_config: a fixture)


def test_both_directions_appends_each_pair_reversed():
    pairs = [([1, 2], [3]), ([4], [5, 6, 7])]
    both = BidirectionalPairs(pairs)
    assert len(both) == 4
    assert list(both) == [([1, 2], [3]), ([4], [5, 6, 7]), ([3], [1, 2]), ([5, 6, 7], [4])]
    assert both[-1] == ([5, 6, 7], [4])
    with pytest.raises(IndexError):
        both[4]


@pytest.mark.parametrize("sampling", [False, True])
def test_the_first_epochs_train_on_the_reversed_pairs_too(tmp_path, tiny_config, sampling):  # noqa: F811
    extra = ["tokenizer.sample_nbest=16"] if sampling else []
    setup = build(tiny_config(tmp_path, "train.bidirectional_epochs=2", *extra))
    task, tok, sampler = setup.task, setup.tokenizer, setup.sampler
    n = len(setup.train.examples) // 2
    for epoch in (0, 3):  # the view always holds both halves (a step may read the next epoch's draw)
        examples = task.epoch_examples(setup.train, tok, epoch)
        assert len(examples) == 2 * n
        assert all(examples[n + i] == examples[i][::-1] for i in range(n))
    forward = task.epoch_examples(setup.train, tok, 0)
    decoded = {(tok.decode(s), tok.decode(t)) for s, t in (forward[i] for i in range(n))}
    assert (tok.decode(forward[n][0]), tok.decode(forward[n][1])) not in decoded  # reversed, not repeated
    assert np.asarray(setup.train.lengths)[n:].tolist() == [
        [len(t), len(s) + 1] for s, t in setup.train.examples.pairs
    ]
    seen = [sorted(i for b in sampler._rank_batches(e) for i in b) for e in range(4)]
    assert seen[0] == seen[1] == list(range(2 * n)) and seen[2] == seen[3] == list(range(n))
    assert any("reversed pairs" in note for note in setup.notes)


@pytest.mark.slow
def test_resume_across_the_switch_continues_exactly(tmp_path, tiny_config):  # noqa: F811
    """8 steps straight == 4 steps, stop, resume, 4 more, crossing from both directions to one."""
    common = ["model.dropout=0.1", "valid.every=4", "train.max_tokens=2000", "data.max_train_pairs=150"]
    common.append("train.bidirectional_epochs=1")
    a, _ = straight_and_resumed(tiny_config, tmp_path, common)
    assert load_checkpoint(tmp_path / "b" / "checkpoint_step4.pt")["sampler"]["epoch"] == 0  # stopped before
    assert a["sampler"]["epoch"] >= 1  # and ended after the switch to source -> target alone


def test_resuming_with_another_bidirectional_setting_is_refused(tmp_path, tiny_config):  # noqa: F811
    run = train(tiny_config(tmp_path, "train.max_steps=2", "valid.every=2"), log=lambda m: None)
    with pytest.raises(ConfigError, match="bidirectional_epochs=0"):
        build(
            tiny_config(tmp_path, "train.max_steps=4", "train.bidirectional_epochs=2"),
            resume=run.last_checkpoint,
        )


@pytest.mark.slow
def test_the_reversed_pairs_are_learned(tmp_path, tiny_config):  # noqa: F811
    """After bidirectional epochs the model translates target -> source better than one trained without."""
    common = ["train.max_steps=60", "valid.every=60", "data.max_train_pairs=200", "train.max_tokens=1500"]
    losses = {}
    for epochs in (0, 1000):
        setup = build(tiny_config(tmp_path / str(epochs), *common, f"train.bidirectional_epochs={epochs}"))
        run = train(setup.cfg, log=lambda m: None)
        setup.model.load_state_dict(load_checkpoint(run.last_checkpoint)["model"])
        n = len(setup.train.examples) // (2 if epochs else 1)
        reversed_pairs = [(t, s) for s, t in (setup.train.examples[i] for i in range(n))][:64]
        batch = setup.task.collate(reversed_pairs, setup.tokenizer)
        setup.model.eval()
        with torch.no_grad():
            out = setup.task.loss(setup.model, batch, setup.tokenizer, epsilon=0.0)
        losses[epochs] = out.nll.item() / int(out.n_tokens)
    assert losses[1000] < losses[0] - 0.3, losses


@pytest.mark.parametrize(
    "overrides",
    [
        ["tokenizer.joint=false", "model.share_vocab=false"],
        ["model.arch=lm", "data.lang=en"],
    ],
)
def test_bidirectional_training_is_refused_where_it_cannot_work(shared_data, tmp_path, overrides):
    extra = ["data.max_train_pairs=50", "tokenizer.vocab_size=200", "train.bidirectional_epochs=2"]
    cfg = load_config(None, [f"data.data_dir={shared_data}", f"output_dir={tmp_path}", *extra, *overrides])
    with pytest.raises(ConfigError, match="bidirectional_epochs"):
        build(cfg)


def test_a_negative_number_of_epochs_is_refused(tiny_config, tmp_path):  # noqa: F811
    with pytest.raises(ConfigError, match="bidirectional_epochs"):
        tiny_config(tmp_path, "train.bidirectional_epochs=-1")
