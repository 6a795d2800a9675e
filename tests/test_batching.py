"""collate and TokenBatchSampler: padding, budget, reproducibility, resume, sharding."""

import functools
import random

import pytest
import torch

from attnkit.data.batching import Batch, TokenBatchSampler, collate
from attnkit.errors import ConfigError, DataError


def _lengths(n=500, seed=0):
    rng = random.Random(seed)
    return [(rng.randint(1, 40), rng.randint(1, 40)) for _ in range(n)]


def _padded_size(lengths, batch):
    return len(batch) * max(max(lengths[i][0], lengths[i][1] + 1) for i in batch)


def test_collate_shapes_padding_and_specials():
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14])], pad_id=0, bos_id=1, eos_id=2)
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.tolist() == [[5, 6, 7], [10, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0, 0], [1, 11, 12, 13, 14]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0, 0], [11, 12, 13, 14, 2]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.n_src_tokens == 4 and batch.n_tgt_tokens == 8
    assert batch.n_tgt_tokens == int((batch.tgt_out != 0).sum())
    # teacher forcing: tgt_out is tgt_in shifted left by one
    assert torch.equal(batch.tgt_in[0, 1:3], batch.tgt_out[0, :2])
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out) and moved.n_tgt_tokens == 8


def test_collate_custom_ids_and_empty_target():
    batch = collate([([4], [])], pad_id=9, bos_id=7, eos_id=8)
    assert batch.tgt_in.tolist() == [[7]] and batch.tgt_out.tolist() == [[8]]
    with pytest.raises(DataError):
        collate([], pad_id=0, bos_id=1, eos_id=2)


def test_every_example_once_per_epoch_and_budget_respected():
    lengths = _lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=200, shuffle=True, seed=1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(len(lengths)))
        assert all(_padded_size(lengths, b) <= 200 for b in batches)


def test_batches_are_length_bucketed():
    lengths = _lengths()
    batches = list(TokenBatchSampler(lengths, max_tokens=400, shuffle=False))
    padded = sum(_padded_size(lengths, b) for b in batches)
    real = sum(max(s, t + 1) for s, t in lengths)
    assert padded < 1.15 * real  # sorting keeps padding small


def test_max_sentences_caps_batch_size():
    batches = list(TokenBatchSampler([(1, 1)] * 50, max_tokens=1000, max_sentences=8))
    assert max(len(b) for b in batches) == 8 and sum(map(len, batches)) == 50


def test_oversized_example_gets_its_own_batch():
    lengths = [(5, 5)] * 10 + [(100, 3)]
    sampler = TokenBatchSampler(lengths, max_tokens=30, shuffle=False)
    batches = list(sampler)
    assert [10] in batches and sampler.n_oversized == 1
    assert sorted(i for b in batches for i in b) == list(range(11))


def test_same_seed_same_order_other_epoch_or_seed_differs():
    lengths = _lengths()
    a = list(TokenBatchSampler(lengths, max_tokens=200, seed=3))
    b = list(TokenBatchSampler(lengths, max_tokens=200, seed=3))
    assert a == b
    s = TokenBatchSampler(lengths, max_tokens=200, seed=3)
    s.set_epoch(1)
    assert list(s) != a
    assert list(TokenBatchSampler(lengths, max_tokens=200, seed=4)) != a
    # without shuffling the order is fixed and sorted by length
    plain = list(TokenBatchSampler(lengths, max_tokens=200, shuffle=False))
    widths = [max(max(lengths[i][0], lengths[i][1] + 1) for i in b) for b in plain]
    assert widths == sorted(widths)


def test_iteration_advances_epoch():
    lengths = _lengths()
    s = TokenBatchSampler(lengths, max_tokens=200, seed=3)
    first = list(s)
    assert s.state_dict() == {"epoch": 1, "position": 0}
    ref = TokenBatchSampler(lengths, max_tokens=200, seed=3)
    ref.set_epoch(1)
    assert list(s) == list(ref) != first


@pytest.mark.parametrize("stop", [0, 1, 7])
def test_state_dict_resume_reproduces_remaining_batches(stop):
    lengths = _lengths()
    full = TokenBatchSampler(lengths, max_tokens=200, seed=5)
    full.set_epoch(2)
    expected = list(full)

    s = TokenBatchSampler(lengths, max_tokens=200, seed=5)
    s.set_epoch(2)
    it = iter(s)
    seen = [next(it) for _ in range(stop)]
    state = s.state_dict()
    assert state == {"epoch": 2, "position": stop}

    resumed = TokenBatchSampler(lengths, max_tokens=200, seed=5)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # a trainer re-entering the same epoch must not rewind
    assert seen + list(resumed) == expected


def test_resume_after_last_batch_starts_next_epoch():
    lengths = _lengths()
    s = TokenBatchSampler(lengths, max_tokens=200, seed=5)
    s.load_state_dict({"epoch": 0, "position": len(s)})
    assert s.state_dict() == {"epoch": 1, "position": 0}
    with pytest.raises(ConfigError, match="position"):
        s.load_state_dict({"epoch": 0, "position": len(s) + 1})


@pytest.mark.parametrize("world_size", [2, 3])
def test_sharding_partitions_batches_with_equal_counts(world_size):
    lengths = _lengths(301)
    single = list(TokenBatchSampler(lengths, max_tokens=150, seed=7))
    shards = [
        list(TokenBatchSampler(lengths, max_tokens=150, seed=7, rank=r, world_size=world_size))
        for r in range(world_size)
    ]
    counts = {len(s) for s in shards}
    assert len(counts) == 1
    n_steps = counts.pop()
    # global step k = the k-th batch of every rank = batches k*W .. k*W+W-1 of the single-process order
    for k in range(n_steps):
        for r in range(world_size):
            assert shards[r][k] == single[(k * world_size + r) % len(single)]
    # every example is covered; only the padding batches repeat (fewer than world_size of them)
    flat = [i for s in shards for b in s for i in b]
    assert set(flat) == set(range(len(lengths)))
    assert n_steps * world_size - len(single) < world_size


def test_bad_arguments():
    with pytest.raises(ConfigError, match="max_tokens"):
        TokenBatchSampler([(1, 1)], max_tokens=0)
    with pytest.raises(ConfigError, match="rank"):
        TokenBatchSampler([(1, 1)], max_tokens=10, rank=2, world_size=2)
    with pytest.raises(DataError, match="empty"):
        TokenBatchSampler([], max_tokens=10)


def test_works_as_dataloader_batch_sampler():
    pairs = [([3] * s, [4] * t) for s, t in _lengths(60)]
    sampler = TokenBatchSampler([(len(s), len(t)) for s, t in pairs], max_tokens=120, seed=0)
    loader = torch.utils.data.DataLoader(
        pairs, batch_sampler=sampler, collate_fn=functools.partial(collate, pad_id=0, bos_id=1, eos_id=2)
    )
    batches = list(loader)
    assert len(batches) == len(sampler)
    assert sum(len(b) for b in batches) == 60
    assert all(b.src.numel() <= 120 and b.tgt_in.numel() <= 120 for b in batches)


def test_epoch_size_batches_only_the_leading_examples_and_resumes_across_the_change():
    """Bidirectional training's sampler: epochs 0-1 batch all 1,000 examples, later ones the first 500."""
    lengths = _lengths(1000)
    size = lambda epoch: 1000 if epoch < 2 else 500  # noqa: E731

    def epochs(sampler, n):
        out = []
        for _ in range(n):
            out.append(list(sampler))
        return out

    s = TokenBatchSampler(lengths, max_tokens=200, seed=5, epoch_size=size)
    straight = epochs(s, 4)
    for e, batches in enumerate(straight):
        seen = sorted(i for b in batches for i in b)
        assert seen == list(range(size(e))), e  # every example of the epoch once, no other
        assert all(_padded_size(lengths, b) <= 200 or len(b) == 1 for b in batches)
    assert s.n_batches(0) > s.n_batches(2) and s.epoch == 4
    assert straight[0] != straight[1]  # still shuffled per epoch

    # Stop inside epoch 1 (the last long one), resume: the same batches, across the change.
    half = TokenBatchSampler(lengths, max_tokens=200, seed=5, epoch_size=size)
    it = iter(half)
    first = [next(it) for _ in range(len(straight[0]))]
    it = iter(half)  # the sampler moved to epoch 1 itself
    first += [next(it) for _ in range(3)]
    resumed = TokenBatchSampler(lengths, max_tokens=200, seed=5, epoch_size=size)
    resumed.load_state_dict(half.state_dict())
    assert resumed.state_dict() == {"epoch": 1, "position": 3}
    rest = [b for e in epochs(resumed, 3) for b in e]
    assert first + rest == [b for e in straight for b in e]


def test_epoch_size_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="epoch_size"):
        TokenBatchSampler(_lengths(10), max_tokens=200, epoch_size=lambda e: 11).n_batches(0)
