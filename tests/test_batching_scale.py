"""TokenBatchSampler at scale: the array-based packing equals the greedy per-example loop it
replaced, for list, array and memmap lengths, and ``epoch_indices`` (weighted corpus mixing)."""

import numpy as np
import pytest
import torch

from attnkit.data.batching import TokenBatchSampler
from attnkit.errors import DataError


def reference_batches(
    lengths,
    max_tokens,
    *,
    epoch=0,
    shuffle=True,
    seed=0,
    max_sentences=None,
    rank=0,
    world_size=1,
    n=None,
    idx=None,
):
    """The sampler before it was vectorised (one Python step per example), as one function; ``idx``
    (the epoch's example indices, ``epoch_indices``' meaning) defaults to the first ``n``."""
    lens = np.asarray(lengths, dtype=np.int64)
    src, tgt = lens[:, 0], lens[:, 1] + 1
    width = np.maximum(src, tgt)
    g = torch.Generator().manual_seed(seed + epoch)
    idx = np.arange(len(width) if n is None else n) if idx is None else idx
    perm = torch.randperm(len(idx), generator=g).numpy() if shuffle else np.arange(len(idx))
    examples = idx[perm]
    order = examples[np.lexsort((tgt[examples], src[examples], width[examples]))]
    batches, cur, cur_width = [], [], 0
    for i, w in zip(order.tolist(), width[order].tolist(), strict=True):
        wide = max(cur_width, w)
        full = max_sentences is not None and len(cur) >= max_sentences
        if cur and (full or (len(cur) + 1) * wide > max_tokens):
            batches.append(cur)
            cur, wide = [], w
        cur.append(i)
        cur_width = wide
    batches.append(cur)
    if shuffle:
        batches = [batches[j] for j in torch.randperm(len(batches), generator=g).tolist()]
    short = -len(batches) % world_size
    batches = batches + [batches[j % len(batches)] for j in range(short)]
    return batches[rank::world_size]


def random_lengths(rng, n, max_len):
    """Ragged (src, tgt) lengths with many ties, zeros, and a few very long pairs."""
    src = rng.integers(0, max_len, n)
    tgt = np.clip(src + rng.integers(-5, 6, n), 0, None)
    long = rng.random(n) < 0.03
    src[long] = rng.integers(max_len, 8 * max_len, long.sum())
    return np.stack([src, tgt], axis=1)  # (n, 2)


def epochs_of(sampler, n_epochs):
    return [list(sampler) for _ in range(n_epochs)]


@pytest.mark.parametrize("case", range(40))
def test_batches_equal_the_greedy_reference(case):
    rng = np.random.default_rng(case)
    n = 20_000 if case % 10 == 0 else int(rng.integers(1, 400))
    lengths = [tuple(p) for p in random_lengths(rng, n, int(rng.integers(2, 60))).tolist()]
    kw = dict(
        shuffle=bool(case % 4),
        seed=int(rng.integers(0, 1000)),
        max_sentences=[None, 1, 2, 7][case % 4],
        world_size=1 + case % 3,
    )
    kw["rank"] = int(rng.integers(0, kw["world_size"]))
    max_tokens = int(rng.integers(1, 600))
    sampler = TokenBatchSampler(lengths, max_tokens, **kw)
    for epoch, got in enumerate(epochs_of(sampler, 3)):
        assert got == reference_batches(lengths, max_tokens, epoch=epoch, **kw), (case, epoch)


def test_epoch_size_equals_the_reference_on_the_leading_examples():
    rng = np.random.default_rng(1)
    lengths = random_lengths(rng, 500, 40)
    size = lambda epoch: 500 if epoch < 2 else 137  # noqa: E731
    for world_size in (1, 3):
        s = TokenBatchSampler(
            lengths, 300, seed=9, epoch_size=size, rank=world_size - 1, world_size=world_size
        )
        for epoch, got in enumerate(epochs_of(s, 4)):
            ref = reference_batches(
                lengths, 300, epoch=epoch, seed=9, n=size(epoch), rank=world_size - 1, world_size=world_size
            )
            assert got == ref


def test_edge_budgets_equal_the_reference():
    """Every example oversized, one batch for all, and lengths too long for the packed sort key."""
    rng = np.random.default_rng(2)
    lengths = random_lengths(rng, 300, 30)
    for max_tokens in (1, 2, 10**12):
        got = list(TokenBatchSampler(lengths, max_tokens, seed=4))
        assert got == reference_batches(lengths, max_tokens, seed=4)
    huge = [(3_000_000, 5), (2, 3_000_001), (7, 7), (3_000_000, 5), (7, 2)]  # key base**3 > 2**63
    for max_tokens in (20, 10**7):
        assert list(TokenBatchSampler(huge, max_tokens, seed=1)) == reference_batches(
            huge, max_tokens, seed=1
        )


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32, np.int64])
def test_array_input_equals_list_input(dtype):
    rng = np.random.default_rng(3)
    hi = min(np.iinfo(dtype).max, 1000)
    lengths = random_lengths(rng, 300, 30).clip(0, hi)
    lengths[:3] = hi  # tgt + 1 must not wrap around in the array's dtype
    as_list = [tuple(p) for p in lengths.tolist()]
    a = TokenBatchSampler(lengths.astype(dtype), 100, seed=2, max_sentences=9)
    b = TokenBatchSampler(as_list, 100, seed=2, max_sentences=9)
    assert epochs_of(a, 2) == epochs_of(b, 2) and a.n_oversized == b.n_oversized > 0


def test_read_only_memmap_input(tmp_path):
    rng = np.random.default_rng(4)
    lengths = random_lengths(rng, 1000, 50).astype(np.int32)
    path = tmp_path / "lengths.npy"
    np.save(path, lengths)
    mm = np.load(path, mmap_mode="r")
    assert isinstance(mm, np.memmap) and not mm.flags.writeable
    s = TokenBatchSampler(mm, 500, seed=3, rank=1, world_size=2)
    assert epochs_of(s, 2) == [
        reference_batches(lengths, 500, epoch=e, seed=3, rank=1, world_size=2) for e in (0, 1)
    ]


def test_bad_lengths_arrays():
    with pytest.raises(ValueError, match="dtype"):
        TokenBatchSampler(np.ones((3, 2)), 10)
    with pytest.raises(ValueError, match="shape"):
        TokenBatchSampler(np.ones((3, 3), dtype=np.int32), 10)
    with pytest.raises(DataError, match="example 1"):
        TokenBatchSampler(np.array([[1, 1], [2, -1]]), 10)


def test_epoch_indices_arange_equals_the_default_and_epoch_size():
    lengths = random_lengths(np.random.default_rng(5), 400, 40)
    plain = TokenBatchSampler(lengths, 250, seed=6, world_size=2, rank=1)
    indexed = TokenBatchSampler(
        lengths, 250, seed=6, world_size=2, rank=1, epoch_indices=lambda e: np.arange(400)
    )
    assert epochs_of(plain, 3) == epochs_of(indexed, 3)
    size = lambda e: 400 - 50 * e  # noqa: E731
    sized = TokenBatchSampler(lengths, 250, seed=6, epoch_size=size)
    ranged = TokenBatchSampler(
        lengths, 250, seed=6, epoch_indices=lambda e: np.arange(size(e), dtype=np.int16)
    )
    assert epochs_of(sized, 3) == epochs_of(ranged, 3)
    with pytest.raises(ValueError, match="not both"):
        TokenBatchSampler(lengths, 250, epoch_size=size, epoch_indices=lambda e: np.arange(4))


def mixing(n_a, n_b):
    """Corpus A (examples 0..n_a-1) at weight 2, corpus B (the rest) at weight 0.5, seeded by the epoch."""

    def indices(epoch):
        half = np.random.default_rng(epoch).permutation(n_b)[: n_b // 2] + n_a
        return np.concatenate([np.arange(n_a), np.arange(n_a), half])

    return indices


def test_epoch_indices_repeats_appear_as_often_as_listed_and_shard():
    lengths = random_lengths(np.random.default_rng(7), 600, 30)
    indices = mixing(200, 400)
    single = TokenBatchSampler(lengths, 200, seed=1, epoch_indices=indices)
    shards = [
        TokenBatchSampler(lengths, 200, seed=1, rank=r, world_size=3, epoch_indices=indices) for r in range(3)
    ]
    for epoch in range(3):
        batches = list(single)
        assert batches == reference_batches(lengths, 200, epoch=epoch, seed=1, idx=indices(epoch))
        counts = np.bincount([i for b in batches for i in b], minlength=600)
        assert (counts == np.bincount(indices(epoch), minlength=600)).all()
        assert counts[:200].min() == 2 and counts[200:].sum() == 200
        assert all(len(b) * max(lengths[b].max(axis=0) + [0, 1]) <= 200 or len(b) == 1 for b in batches)
        steps = [list(s) for s in shards]
        for k in range(len(steps[0])):
            for r in range(3):
                assert steps[r][k] == batches[(3 * k + r) % len(batches)]
    fixed = TokenBatchSampler(lengths, 200, shuffle=False, epoch_indices=indices)
    assert list(fixed) != list(fixed)  # without shuffling the epochs still differ: their indices do


def test_epoch_indices_bad_values_are_data_errors():
    lengths = [(3, 3)] * 10
    for bad in ([], [0, 10], [-1, 2], np.zeros((2, 2), dtype=int), [0.5]):
        s = TokenBatchSampler(lengths, 50, epoch_indices=lambda e, bad=bad: np.asarray(bad))
        with pytest.raises(DataError, match="epoch_indices"):
            s.n_batches(0)


@pytest.mark.parametrize("stop", [0, 5, 23])
def test_resume_mid_epoch_with_epoch_indices(stop):
    lengths = random_lengths(np.random.default_rng(8), 600, 30)
    make = lambda: TokenBatchSampler(lengths, 200, seed=3, epoch_indices=mixing(200, 400))  # noqa: E731
    expected = [b for e in epochs_of(make(), 3) for b in e]
    s = make()
    seen = list(s)  # epoch 0
    it = iter(s)
    seen += [next(it) for _ in range(stop)]
    resumed = make()
    resumed.load_state_dict(s.state_dict())
    assert resumed.state_dict() == {"epoch": 1, "position": stop}
    assert seen + [b for e in epochs_of(resumed, 2) for b in e] == expected
