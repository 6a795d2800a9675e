"""The training parts of bench/gpu_suite.py: a short Multi30k training and the two-GPU all-reduce.

``train_multi30k`` trains configs/multi30k_de_en_best.yaml through attnkit's own trainer
(``attnkit.train.train``, as ``attnkit train`` does) for ``train.max_minutes`` and scores its best
checkpoint on test_2016_flickr with beam 4 through bench/quality.py's ``score`` (attnkit's one
translation evaluation). ``nccl`` all-reduces a buffer across two GPUs in two processes: the sums
must be right, and the bus bandwidth is nccl-tests' (2 (n - 1) / n of bytes over time).
"""

from __future__ import annotations

import csv
import gzip
import json
import socket
import statistics
import time
from pathlib import Path

import torch

from .gpu_parts import ROOT, Context, Emit, Part


def cut_corpus(data_dir: str, out: Path, sizes: tuple[int, int, int]) -> tuple[Path, str]:
    """A small Multi30k folder (the first pairs of each split), or a synthetic one without the corpus."""
    src_dir = Path(data_dir) / "multi30k"
    (out / "multi30k").mkdir(parents=True, exist_ok=True)
    real = (src_dir / "train.de.gz").is_file()
    words = "Hund Katze Mann Frau Kind Ball Wasser Straße rot blau groß klein spielt läuft sitzt".split()
    english = "dog cat man woman child ball water street red blue big small plays runs sits".split()
    for split, n in zip(("train", "val", "test_2016_flickr"), sizes):
        lines = {}
        if real:
            for lang in ("de", "en"):
                with gzip.open(src_dir / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                    lines[lang] = [next(f) for _ in range(n)]
        else:  # a word-for-word toy translation task
            g = torch.Generator().manual_seed(len(split))
            ids = [
                torch.randint(0, len(words), (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
                for _ in range(n)
            ]
            lines["de"] = [" ".join(words[i] for i in row.tolist()) + "\n" for row in ids]
            lines["en"] = [" ".join(english[i] for i in row.tolist()) + "\n" for row in ids]
        for lang, text in lines.items():
            with gzip.open(out / "multi30k" / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(text))
    return out, "the first pairs of Multi30k" if real else "synthetic (no Multi30k under the data folder)"


def train_multi30k(ctx: Context, emit: Emit) -> None:
    """A short training of configs/multi30k_de_en_best.yaml by attnkit's trainer, then test BLEU (beam 4)."""
    from attnkit.train import load_config, train

    from .quality import score

    s = ctx.sizes
    data_dir, corpus = Path(ctx.data_dir), "Multi30k"
    if s.corpus_pairs:
        data_dir, corpus = cut_corpus(ctx.data_dir, ctx.work / "corpus", s.corpus_pairs)
    elif not (data_dir / "multi30k" / "train.de.gz").is_file():
        raise FileNotFoundError(
            f"no Multi30k under {data_dir}/multi30k: copy it into a folder the checkout ignores and carry it"
        )
    config = "configs/multi30k_de_en_best.yaml"
    overrides = [f"train.max_minutes={s.train_minutes}", f"train.device={ctx.device}", *s.train_overrides]
    emit(config=config, overrides=overrides, corpus=f"{corpus} ({data_dir})")
    hidden = [f"data.data_dir={data_dir}", f"output_dir={ctx.work / 'multi30k_best'}"]
    cfg = load_config(ROOT / config, overrides + hidden)
    t0 = time.monotonic()
    result = train(cfg, overwrite=True, log=lambda m: print(m, flush=True))
    minutes = (time.monotonic() - t0) / 60
    with result.metrics_csv.open() as f:
        rates = [float(r["tokens_per_s"]) for r in csv.DictReader(f) if r.get("tokens_per_s")]
    row = {
        "steps": result.step,
        "train_minutes": minutes,
        "steps_per_s": result.step / (60 * minutes),
        "tokens_per_s": statistics.median(rates) if rates else None,
        "valid_bleu_best": result.best_score,
    }
    emit(rows=[row])
    test = score(str(result.best_checkpoint), "de-en", str(data_dir), beams=(4,))
    row.update(test["beam4"], params=test["params"])
    emit(rows=[row], test="test_2016_flickr, best checkpoint, beam 4")


def train_fp16(ctx: Context, emit: Emit) -> None:
    """train.precision=fp16 (loss scaling) beside bf16 on the main job's config, N steps each, and
    fp16's resume: N/2 steps, stop, resume, N/2 more against N straight (largest weight difference;
    CUDA's atomic adds in some backward kernels may keep it from 0). On a CPU (--smoke) the build's
    CUDA check is bypassed so that the same code runs."""
    import sys

    from attnkit.checkpoint import load_checkpoint
    from attnkit.train import load_config, train

    if ctx.device == "cpu":  # fp16 is refused on a CPU; the mechanics run there in the smoke test
        sys.modules["attnkit.train.build"].__dict__["resolve_precision"] = lambda setting, device: setting
    s = ctx.sizes
    data_dir, corpus = cut_corpus(ctx.data_dir, ctx.work / "fp16_corpus", s.fp16_pairs)
    config = "configs/multi30k_de_en_tiny.yaml"
    n = s.fp16_steps
    common = [
        "train.max_minutes=0",
        f"train.device={ctx.device}",
        "train.progress=false",
        f"train.log_every={max(n // 4, 1)}",
        "valid.max_sentences=100",
        *s.fp16_overrides,
    ]
    emit(config=config, overrides=common, steps=n, corpus=corpus)

    def run(name: str, precision: str, steps: int, resume=None) -> dict:
        cfg = load_config(
            ROOT / config,
            [
                *common,
                f"train.precision={precision}",
                f"train.max_steps={steps}",
                f"valid.every={n // 2}",
                f"data.data_dir={data_dir}",
                f"output_dir={ctx.work / name}",
            ],
        )
        t0 = time.monotonic()
        result = train(cfg, overwrite=resume is None, resume=resume, log=lambda m: print(m, flush=True))
        with result.metrics_csv.open() as f:
            rows = [r for r in csv.DictReader(f) if r.get("train_loss")]
        state = load_checkpoint(result.last_checkpoint)
        return {
            "run": name,
            "precision": precision,
            "steps": state["step"],
            "seconds": time.monotonic() - t0,
            "train_loss": float(rows[-1]["train_loss"]) if rows else None,
            "valid_bleu": result.best_score,
            "loss_scale": state.get("grad_scaler", {}).get("scale"),
            "path": str(result.last_checkpoint),
            "model": state["model"],
        }

    rows: list[dict] = []

    def show(row: dict) -> None:
        rows.append({k: v for k, v in row.items() if k not in ("model", "path")})
        emit(rows=rows)

    bf16 = run("bf16", "bf16", n)
    show(bf16)
    straight = run("fp16", "fp16", n)
    show(straight)
    half = run("fp16_resumed", "fp16", n // 2)
    resumed = run("fp16_resumed", "fp16", n, resume=half["path"])
    diff = max(float((straight["model"][k] - t).abs().max()) for k, t in resumed["model"].items())
    resumed["resume_max_abs_diff"] = diff
    show(resumed)


def nccl(ctx: Context, emit: Emit, backend: str = "nccl", world: int = 2) -> None:
    """An all-reduce across two GPUs (two processes): correct sums and bus bandwidth."""
    import torch.multiprocessing as mp

    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = ctx.work / "nccl_rank0.json"
    mib = 256 if ctx.device == "cuda" else 4
    mp.spawn(_nccl_worker, args=(world, backend, port, mib, str(out)), nprocs=world, join=True)
    emit(rows=[{"backend": backend, "world_size": world, "size_mib": mib, **json.loads(out.read_text())}])


def _nccl_worker(rank: int, world: int, backend: str, port: int, mib: int, out: str) -> None:
    import torch.distributed as dist

    dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        x = torch.full((mib * 2**20 // 4,), float(rank + 1), device=dev)  # float32
        dist.all_reduce(x)
        correct = bool((x == world * (world + 1) / 2).all())
        times = []
        for i in range(8):
            if dev.type == "cuda":
                torch.cuda.synchronize()
            dist.barrier(device_ids=[rank] if dev.type == "cuda" else None)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i >= 3:
                times.append(time.perf_counter() - t0)
        algbw = mib * 2**20 / statistics.median(times) / 1e9
        if rank == 0:
            busbw = algbw * 2 * (world - 1) / world  # nccl-tests' bus bandwidth of an all-reduce
            result = {
                "correct": correct,
                "median_ms": 1e3 * statistics.median(times),
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
            }
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


PARTS = {
    "train_multi30k": Part(
        train_multi30k,
        140,
        (
            ("steps", "steps", ",d"),
            ("minutes", "train_minutes", ".2f"),
            ("tok/s", "tokens_per_s", ",.0f"),
            ("valid BLEU (greedy)", "valid_bleu_best", ".2f"),
            ("test BLEU (beam 4)", "bleu", ".2f"),
            ("lc BLEU", "bleu_lowercase", ".2f"),
            ("chrF", "chrf", ".2f"),
        ),
    ),
    "train_fp16": Part(
        train_fp16,
        65,
        (
            ("run", "run", ""),
            ("precision", "precision", ""),
            ("steps", "steps", ",d"),
            ("s", "seconds", ".1f"),
            ("train loss", "train_loss", ".3f"),
            ("valid BLEU (greedy)", "valid_bleu", ".2f"),
            ("loss scale", "loss_scale", ",.0f"),
            ("resume: max abs weight diff", "resume_max_abs_diff", ".2e"),
        ),
    ),
    "nccl": Part(
        nccl,
        10,
        (
            ("GPUs", "world_size", ""),
            ("MiB", "size_mib", ""),
            ("all-reduce ms", "median_ms", ".2f"),
            ("bus GB/s", "busbw_gbps", ".1f"),
            ("sums correct", "correct", ""),
        ),
    ),
}
