"""The training-speed parts of bench/gpu_suite.py: the paper's base and big models, attnkit eager and
as ``train.compile`` runs its step (with and without ``train.output_loss_chunk``), beside HF Marian."""

from __future__ import annotations

import statistics
import time

import torch

from attnkit.linear_loss import CHUNK

from .gpu_parts import Context, Emit, Part, adapters_of, autocast, datasheet_peak, free_memory, timing_args
from .timing import add_mfu, peak_flops, train_benchmark
from .workloads import random_batch


def train_rows(
    train: dict, label_of: dict, n_params: dict, peak: float | None, measured: float
) -> list[dict]:
    """Per engine: median target tokens/s, achieved TFLOP/s, and MFU against the datasheet ``peak``
    (None where it is unknown) and against the ``measured`` matmul peak, both in FLOP/s."""
    add_mfu({"batch": train}, measured)
    rows = []
    for name, r in train.items():
        flops = statistics.median(f / t for f, t in zip(r["step_flops"], r["step_s"]))
        rows.append(
            {
                "engine": label_of[name],
                "n_params": n_params[name],
                "tokens_per_s": r["median"],
                "tokens_per_s_best": r["best"],
                "step_ms": 1e3 * statistics.median(r["step_s"]),
                "tflops": flops / 1e12,
                "mfu": flops / peak if peak else None,
                "mfu_measured": r["mfu_median"],
            }
        )
    return rows


def train_base(ctx: Context, emit: Emit) -> None:
    """The paper's base model: attnkit eager and compiled (plain loss and chunked), HF Marian eager."""
    train_model(ctx, emit, ctx.sizes.base, chunks=(0, CHUNK))


def train_big(ctx: Context, emit: Emit) -> None:
    """The paper's big model: attnkit eager and compiled, HF Marian eager."""
    train_model(ctx, emit, ctx.sizes.big, chunks=(0,))


def train_model(ctx: Context, emit: Emit, dims: dict, chunks: tuple[int, ...]) -> None:
    """Training tokens/s and MFU of a model of ``dims``: attnkit eager and HF Marian eager, then
    attnkit's step as ``train.compile`` runs it, once per ``train.output_loss_chunk`` in ``chunks``."""
    s, dev, amp = ctx.sizes, ctx.device, autocast(ctx.device)
    peak = datasheet_peak(dev)
    measured, _ = peak_flops(dev, torch.bfloat16, s.peak_n)
    emit(
        model={**dims, "vocab": s.vocab, "dropout": s.dropout},
        precision="bf16 autocast",
        peak=peak,
        measured_matmul_tflops=measured / 1e12,
    )
    B, L = s.train_batch
    while True:  # halve the batch until one round of every engine fits
        try:
            batch = random_batch(B, L, vocab=s.vocab).to(dev)
            adapters = adapters_of(dims, s.vocab, dev, hf=True, dropout=s.dropout)
            eager = train_benchmark(adapters, [batch], dims, timing_args(ctx), amp, vocab=s.vocab)
            break
        except torch.OutOfMemoryError:
            adapters = {}
            free_memory()
            if B == 1:
                raise
            B //= 2
    emit(batch={"B": B, "L": L, "target_tokens": batch.n_tgt_tokens, "first_B": s.train_batch[0]})
    if "transformers-marian" not in adapters:
        emit(notes=["HF MarianMTModel: transformers is not installed"])
    labels = {"attnkit": "attnkit eager", "transformers-marian": "HF MarianMTModel eager"}
    n_params = {name: a.n_params for name, a in adapters.items()}
    datasheet = peak["tflops"] * 1e12 if peak["tflops"] else None
    rows = train_rows(eager, labels, n_params, datasheet, measured)
    emit(rows=rows)
    del adapters
    free_memory()
    for chunk in chunks:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        step = dict(chunk=chunk, compile_backend=s.compile_backend)
        compiled = adapters_of(dims, s.vocab, dev, hf=False, dropout=s.dropout, **step)
        t0 = time.perf_counter()
        res = train_benchmark(compiled, [batch], dims, timing_args(ctx), amp, vocab=s.vocab)
        loss = f", output_loss_chunk {chunk}" if chunk else ""
        label = {"attnkit": f"attnkit train.compile ({s.compile_backend}{loss})"}
        rows += train_rows(res, label, {"attnkit": compiled["attnkit"].n_params}, datasheet, measured)
        counters = torch._dynamo.utils.counters
        rows[-1].update(
            with_compile_s=time.perf_counter() - t0,
            graphs=counters["stats"].get("unique_graphs", 0),
            graph_breaks=sum(counters["graph_break"].values()),
        )
        emit(rows=rows)
        del compiled
        free_memory()


TRAIN_COLUMNS = (  # the table of train_base and train_big
    ("engine", "engine", ""),
    ("params", "n_params", ",.0f"),
    ("target tok/s", "tokens_per_s", ",.0f"),
    ("step ms", "step_ms", ".1f"),
    ("TFLOP/s", "tflops", ".3g"),
    ("MFU (datasheet peak)", "mfu", ".1%"),
    ("MFU (measured matmul)", "mfu_measured", ".1%"),
)
PARTS = {
    "train_base": Part(train_base, 100, TRAIN_COLUMNS),
    "train_big": Part(train_big, 90, TRAIN_COLUMNS),
}
