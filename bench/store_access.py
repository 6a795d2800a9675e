"""Random access to prepared pairs: attnkit's memory-mapped arrays against an Arrow dataset.

    python -m bench.store_access --prepared /tmp/data_scale/prep_c1m [--reads 20000]

Why attnkit prepares into numpy arrays rather than Hugging Face ``datasets`` (Arrow): training
reads pairs by index in a random order (a shuffled, length-sorted epoch), so the cost that matters
is one random read. Both stores hold the same ids; both are memory-mapped; the reads are the same
seeded indices. Reports microseconds per pair read as lists of ints, and each store's size on disk.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prepared", type=Path, required=True, help="a folder written by attnkit prepare")
    ap.add_argument("--reads", type=int, default=20000)
    args = ap.parse_args()
    import datasets

    from attnkit.data.prepared import read_manifest
    from attnkit.data.store import PairStore, Side

    manifest = read_manifest(args.prepared)
    dtype = np.dtype(manifest["dtype"])
    sides = [
        Side(
            np.memmap(args.prepared / f"train.{s}.bin", dtype=dtype, mode="r"),
            np.load(args.prepared / f"train.{s}.idx.npy", mmap_mode="r"),
        )
        for s in ("src", "tgt")
    ]
    store = PairStore(*sides)
    idx = np.random.default_rng(0).integers(0, len(store), args.reads).tolist()
    with tempfile.TemporaryDirectory() as tmp:

        def rows():
            for i in range(len(store)):
                s, t = store[i]
                yield {"src": s, "tgt": t}

        features = datasets.Features(
            {
                "src": datasets.Sequence(datasets.Value("uint16")),
                "tgt": datasets.Sequence(datasets.Value("uint16")),
            }
        )
        start = time.perf_counter()
        datasets.Dataset.from_generator(rows, features=features, cache_dir=tmp).save_to_disk(f"{tmp}/arrow")
        build_s = time.perf_counter() - start
        arrow = datasets.load_from_disk(f"{tmp}/arrow")  # memory-mapped Arrow
        arrow_mb = sum(p.stat().st_size for p in Path(f"{tmp}/arrow").glob("*.arrow")) / 2**20
        results = {}
        for name, read in (("numpy memmap", lambda i: store[i]), ("arrow (datasets)", lambda i: arrow[i])):
            read(idx[0])
            start = time.perf_counter()
            for i in idx:
                read(i)
            results[name] = round((time.perf_counter() - start) / len(idx) * 1e6, 2)
    prepared_mb = sum(
        (args.prepared / f"train.{s}.{k}").stat().st_size for s in ("src", "tgt") for k in ("bin", "idx.npy")
    )
    print(
        json.dumps(
            {
                "pairs": len(store),
                "us_per_read": results,
                "arrow_to_numpy": round(results["arrow (datasets)"] / results["numpy memmap"], 1),
                "disk_mb": {
                    "numpy memmap": round(prepared_mb / 2**20, 1),
                    "arrow (datasets)": round(arrow_mb, 1),
                },
                "arrow_build_s": round(build_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
