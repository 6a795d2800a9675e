"""CTranslate2 decoding timings for bench/speed.py, in a process of its own.

    python bench/speed_worker_ct2.py JOB.pt        (JOB.pt is written by bench/speed.py)

CTranslate2's OpenMP thread pool and torch's would fight for the same cores in one process, so
speed.py waits idle while this worker runs. The job holds the saved MarianMTModel folder, the thread
count, the compute types and the decoding settings (beam size and source id batches). Each compute
type is converted by ``peers.build_ctranslate2``; the compute types take turns at every repeat, as
the peers do in speed.py. The last stdout line is JSON:
{compute_type: {"name", "version", "n_params", "notes", "decode": {setting: [sentences/s, ...]}}}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402


def main(job_path: str) -> int:
    job = torch.load(job_path)
    torch.set_num_threads(1)  # torch only shuffles ids here; CTranslate2 gets job["threads"]
    from transformers import MarianMTModel

    marian = MarianMTModel.from_pretrained(job["marian_dir"])
    adapters = {
        ct: peers.build_ctranslate2(compute_type=ct, marian_model=marian, intra_threads=job["threads"])
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
        for i in range(job["warmup"] + job["repeats"]):
            for ct, adapter in adapters.items():
                t0 = time.perf_counter()
                for src in sources:
                    out = adapter.decode_fn(src, beam_size=beam, n_tokens=n_tokens)
                    if tuple(out.shape) != (src.size(0), n_tokens) or bool((out == job["eos_id"]).any()):
                        raise RuntimeError(f"{ct} beam {beam}: {tuple(out.shape)} is not {n_tokens} tokens")
                if i >= job["warmup"]:
                    speeds[ct].append(n_sent / (time.perf_counter() - t0))
        for ct in adapters:
            result[ct]["decode"][setting["label"]] = speeds[ct]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
