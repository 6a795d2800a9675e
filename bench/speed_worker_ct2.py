"""CTranslate2 decoding timings for bench.speed, in a process of its own.

    python -m bench.speed_worker_ct2 JOB.pt        (JOB.pt is written by run_ct2, called by bench.speed)

CTranslate2's OpenMP thread pool and torch's would fight for the same cores in one process, so
bench.speed waits idle while this worker runs. The job holds the saved MarianMTModel folder, the
thread count, the compute types and the decoding settings (beam size and source id batches). Each
compute type is converted by ``bench.peers.ctranslate2.build``; the compute types take turns at
every repeat, as the peers do in bench.speed. The last stdout line is JSON:
{compute_type: {"name", "version", "n_params", "notes", "decode": {setting: [sentences/s, ...]}}}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]  # the repository root: `-m bench.…` resolves from there


def run_ct2(
    marian_model, decode_sets: dict, n_tokens: int, *, warmup: int, repeats: int, eos_id: int
) -> dict:
    """Time CTranslate2 float32 and int8 in a worker process on ``marian_model``'s weights.

    decode_sets: label -> (beam size, list of source id batches (B, S)). This process waits idle.
    """
    settings = [dict(label=label, beam=beam, sources=srcs) for label, (beam, srcs) in decode_sets.items()]
    with tempfile.TemporaryDirectory(prefix="attnkit-speed-") as tmp:
        marian_dir, job_path = os.path.join(tmp, "marian"), os.path.join(tmp, "job.pt")
        marian_model.save_pretrained(marian_dir)
        job = dict(
            marian_dir=marian_dir,
            threads=torch.get_num_threads(),
            compute_types=["float32", "int8"],
            n_tokens=n_tokens,
            warmup=warmup,
            repeats=repeats,
            eos_id=eos_id,
            settings=settings,
        )
        torch.save(job, job_path)
        cmd = [sys.executable, "-m", "bench.speed_worker_ct2", job_path]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"CTranslate2 worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(job_path: str) -> int:
    # Imported here, in the worker only: the parent must not start CTranslate2's thread pool.
    from transformers import MarianMTModel

    from .peers import ctranslate2 as ct2_peer

    job = torch.load(job_path)
    torch.set_num_threads(1)  # torch only shuffles ids here; CTranslate2 gets job["threads"]
    marian = MarianMTModel.from_pretrained(job["marian_dir"])
    adapters = {
        ct: ct2_peer.build(compute_type=ct, marian_model=marian, intra_threads=job["threads"])
        for ct in job["compute_types"]
    }
    result = {
        ct: {"name": a.name, "version": a.version, "n_params": a.n_params, "notes": a.notes, "decode": {}}
        for ct, a in adapters.items()
    }
    n_tokens = job["n_tokens"]
    for setting in job["settings"]:
        sources, beam = setting["sources"], setting["beam"]
        n_sent = sum(src.size(0) for src in sources)
        speeds = {ct: [] for ct in adapters}
        # CTranslate2's users hand it token strings: they are made here, outside the timed call
        batches = {ct: [a.extra["prepare"](src) for src in sources] for ct, a in adapters.items()}
        for i in range(job["warmup"] + job["repeats"]):
            for ct, adapter in adapters.items():
                t0 = time.perf_counter()
                results = [adapter.extra["run"](b, beam_size=beam, n_tokens=n_tokens) for b in batches[ct]]
                elapsed = time.perf_counter() - t0
                for src, res in zip(sources, results):
                    out = adapter.extra["to_ids"](res)  # (B, n_tokens), checked after the clock stops
                    if tuple(out.shape) != (src.size(0), n_tokens) or bool((out == job["eos_id"]).any()):
                        raise RuntimeError(f"{ct} beam {beam}: {tuple(out.shape)} is not {n_tokens} tokens")
                if i >= job["warmup"]:
                    speeds[ct].append(n_sent / elapsed)
        for ct in adapters:
            result[ct]["decode"][setting["label"]] = speeds[ct]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
