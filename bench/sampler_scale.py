"""Time and memory of ``TokenBatchSampler`` on a corpus of N sentence pairs (WMT14 en-de: 4.5M).

    PYTHONPATH=src python -m bench.sampler_scale [--n 4500000] [--max-tokens 4096]
        [--max-sentences N] [--world-size 1] [--epochs 2] [--list] [--seed 0]

The lengths are drawn with numpy (log-normal around 25 subwords, clipped to 1..250, the target
within about 20% of the source, 0.1% over the budget) and given as an (N, 2) int32 array, or with
``--list`` as a list of tuples (what ``Encoded.lengths`` holds for a corpus read as text). Each
stage is timed on its own: building the sampler, then for each epoch building its plan
(``n_batches``) and iterating it (every batch as the list of indices a DataLoader receives). The
peak RSS after each stage (``resource.getrusage``, so it never goes down) shows what each needs,
the RSS now what it keeps.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from attnkit.data.batching import TokenBatchSampler


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def rss_mib() -> float:
    """The RSS now (what a stage keeps), from /proc on Linux; nan elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return float("nan")


def make_lengths(n: int, seed: int) -> np.ndarray:
    """(n, 2) int32 (src_len, tgt_len) with a corpus-like spread and many ties."""
    rng = np.random.default_rng(seed)
    src = np.clip(rng.lognormal(np.log(25), 0.6, n), 1, 250)
    tgt = np.clip(src * rng.normal(1.0, 0.1, n), 1, 250)
    lengths = np.stack([src, tgt], axis=1).astype(np.int32)  # (n, 2)
    lengths[rng.random(n) < 0.001, 0] = 5000  # a few pairs over any usual budget
    return lengths


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=4_500_000, help="sentence pairs")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--max-sentences", type=int, default=None)
    p.add_argument("--world-size", type=int, default=1, help="the sampler of rank 0 of this many")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--list", action="store_true", help="give the lengths as a list of tuples")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    print(f"N={args.n:,} max_tokens={args.max_tokens} input={'list' if args.list else 'int32 array'}")
    print(f"{'stage':<24}{'seconds':>9}{'peak RSS MiB':>14}{'RSS now MiB':>13}")
    print(f"{'imports':<24}{'':>9}{peak_rss_mib():>14.0f}{rss_mib():>13.0f}")
    lengths = make_lengths(args.n, args.seed)
    given = [tuple(pair) for pair in lengths.tolist()] if args.list else lengths
    print(f"{'lengths made':<24}{'':>9}{peak_rss_mib():>14.0f}{rss_mib():>13.0f}")

    def stage(name: str, fn):
        start = time.perf_counter()
        out = fn()
        print(f"{name:<24}{time.perf_counter() - start:>9.2f}{peak_rss_mib():>14.0f}{rss_mib():>13.0f}")
        return out

    sampler = stage(
        "build sampler",
        lambda: TokenBatchSampler(
            given, args.max_tokens, seed=1, max_sentences=args.max_sentences, world_size=args.world_size
        ),
    )
    for epoch in range(args.epochs):
        n_batches = stage(f"epoch {epoch}: plan", lambda e=epoch: sampler.n_batches(e))
        n_seen = stage(f"epoch {epoch}: iterate", lambda: sum(len(batch) for batch in sampler))
        print(f"  {n_batches:,} batches, {n_seen:,} examples on rank 0")
    print(f"oversized examples: {sampler.n_oversized:,}")


if __name__ == "__main__":
    main()
