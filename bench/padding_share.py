"""How much of a WMT14 recipe's batch is padding: the share of padded positions in one epoch's
batches, as ``TokenBatchSampler`` builds them at the config's ``train.max_tokens``.

    python -m bench.padding_share [--pairs 4500000] [--seed 0] [--out FILE]

No WMT14 corpus can be read here, so the lengths are drawn: subword lengths of the source from a
log-normal with WMT14 en-de's shape after a 32k-piece vocabulary (median 25, mean about 29, a long
tail cut at the configs' ``data.max_len``), the target's as the source's times a ratio drawn around
1 (standard deviation 0.15) and kept within the configs' ``data.max_len_ratio`` of 1.5. What it
reports, for the base and big configs: real and padded tokens of the encoder's and the decoder's
inputs, and the share of padding in each, over a whole epoch.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

from attnkit.data.batching import TokenBatchSampler
from attnkit.train import load_config

CONFIGS = ("configs/wmt14_en_de_base.yaml", "configs/wmt14_en_de_big.yaml")


def draw_lengths(pairs: int, seed: int, max_len: int, max_ratio: float) -> np.ndarray:
    """(pairs, 2) source and target subword lengths, as described above."""
    rng = np.random.default_rng(seed)
    src = np.rint(rng.lognormal(mean=np.log(25.0), sigma=0.55, size=pairs)).clip(1, max_len)
    ratio = rng.normal(1.0, 0.15, size=pairs).clip(1 / max_ratio, max_ratio)
    tgt = np.rint(src * ratio).clip(1, max_len)
    return np.stack([src, tgt], axis=1).astype(np.int32)


def padding(lengths: np.ndarray, max_tokens: int) -> dict[str, float]:
    """Real and padded tokens of one epoch's batches, encoder (source) and decoder (target + 1)."""
    sampler = TokenBatchSampler(lengths, max_tokens, shuffle=True, seed=1)
    src, tgt = lengths[:, 0].astype(np.int64), lengths[:, 1].astype(np.int64) + 1  # (N,), bos/eos
    real_src = real_tgt = padded_src = padded_tgt = batches = 0
    for batch in sampler:
        b = np.asarray(batch)
        s, t = src[b], tgt[b]  # (n,) each
        real_src, real_tgt = real_src + int(s.sum()), real_tgt + int(t.sum())
        padded_src, padded_tgt = padded_src + len(b) * int(s.max()), padded_tgt + len(b) * int(t.max())
        batches += 1
    return {
        "batches": batches,
        "real_src_tokens": real_src,
        "padded_src_tokens": padded_src,
        "src_padding_share": 1 - real_src / padded_src,
        "real_tgt_tokens": real_tgt,
        "padded_tgt_tokens": padded_tgt,
        "tgt_padding_share": 1 - real_tgt / padded_tgt,
        "real_tgt_tokens_per_batch": real_tgt / batches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for path in CONFIGS:
        cfg = load_config(path, [])
        lengths = draw_lengths(args.pairs, args.seed, cfg.data.max_len, cfg.data.max_len_ratio)
        row = {"config": path, "max_tokens": cfg.train.max_tokens, **padding(lengths, cfg.train.max_tokens)}
        rows.append(row)
        print(
            f"{path}: {row['batches']:,} batches of {row['max_tokens']:,} tokens; padding "
            f"{row['src_padding_share']:.2%} of the source, {row['tgt_padding_share']:.2%} of the target; "
            f"{row['real_tgt_tokens_per_batch']:,.0f} real target tokens a batch"
        )
    if args.out:
        meta = {"pairs": args.pairs, "seed": args.seed, "machine": platform.machine(), "python": sys.version}
        args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
