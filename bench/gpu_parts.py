"""The attention and decoding parts of bench/gpu_suite.py, the sizes of every part, and what parts share.

Each part runs in a process of its own. A part is ``fn(ctx, emit)``: it measures on ``ctx.device``
at ``ctx.sizes`` (the GPU run's, or the smoke test's toy sizes) and calls ``emit(key=value, ...)``
as each piece is known, so a part killed at its time box still leaves what it measured. The timing
and FLOP helpers are bench/timing.py's and the adapters bench/peers/': nothing here measures
differently from bench/speed.py.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from .peers.common import BASE, BIG, BOS, EOS, PAD, marian_sizes
from .timing import decode_benchmark, round_robin
from .workloads import random_batch

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
Emit = Callable[..., None]


@dataclass(frozen=True)
class Sizes:
    """Everything that differs between the GPU run and the CPU smoke test."""

    base: dict  # the "base" model of train_base and decode (attnkit's TransformerConfig names)
    big: dict  # the "big" model of train_big
    vocab: int  # its shared vocabulary
    dropout: float  # of the models trained by train_base
    train_batch: tuple[int, int]  # (B, L): B x L target tokens per step, halved on CUDA OOM
    warmup: int  # untimed steps first (the compiled model compiles in them)
    repeats: int  # timed training steps
    compile_backend: str  # torch.compile backend of the compiled row
    peak_n: int  # n of the n x n x n matmul that measures the peak
    attn_dims: tuple[int, int]  # (d_model, n_heads) of the attention part
    attn_tokens: int  # B x T, fixed across lengths
    attn_lengths: tuple[int, ...]
    decode_batch: int  # sentences per decoding call
    n_tokens: int  # output tokens per sentence (EOS masked until then)
    decode_repeats: int
    train_minutes: float  # train.max_minutes of the Multi30k run
    train_overrides: tuple[str, ...]  # key=value for the Multi30k run beyond the config
    corpus_pairs: tuple[int, int, int]  # (train, val, test) pairs of a cut corpus; () = the real one
    fp16_steps: int  # steps of each train_fp16 run (its resume check stops at half)
    fp16_pairs: tuple[int, int, int]  # the cut corpus of train_fp16
    fp16_overrides: tuple[str, ...]  # key=value for train_fp16 beyond the main job's config


GPU = Sizes(
    base=BASE,
    big=BIG,
    vocab=37000,
    dropout=0.1,
    train_batch=(500, 50),
    warmup=3,
    repeats=20,
    compile_backend="inductor",
    peak_n=8192,
    attn_dims=(512, 8),
    attn_tokens=16384,
    attn_lengths=(512, 1024, 2048, 4096, 8192),
    decode_batch=256,
    n_tokens=30,
    decode_repeats=3,
    train_minutes=1.75,
    train_overrides=(),
    corpus_pairs=(),
    fp16_steps=200,
    fp16_pairs=(10000, 100, 100),
    fp16_overrides=("tokenizer.vocab_size=2000", "train.warmup_steps=100"),
)
SMOKE = Sizes(
    base=TINY,
    big=dict(TINY, d_model=48, d_ff=96),
    vocab=1000,
    dropout=0.1,
    train_batch=(8, 16),
    warmup=1,
    repeats=2,
    compile_backend="aot_eager",  # dynamo and AOT autograd's graphs, without inductor's code (seconds)
    peak_n=256,
    attn_dims=(64, 4),
    attn_tokens=1024,
    attn_lengths=(64, 128, 256),
    decode_batch=8,
    n_tokens=8,
    decode_repeats=1,
    train_minutes=0.12,
    train_overrides=(
        *(f"model.{k}={v}" for k, v in TINY.items()),
        "tokenizer.vocab_size=300",
        "train.max_tokens=1000",
        "train.warmup_steps=20",
        "valid.every=50",
        "valid.keep_last=2",
        "valid.average_last=2",
    ),
    corpus_pairs=(300, 20, 40),
    fp16_steps=4,
    fp16_pairs=(300, 20, 20),
    fp16_overrides=(
        *(f"model.{k}={v}" for k, v in TINY.items()),
        "tokenizer.vocab_size=300",
        "train.max_tokens=1000",
        "train.warmup_steps=2",
    ),
)

# Dense BF16 Tensor Core peaks from NVIDIA's datasheets (their "with sparsity" figures halved).
# Checked in order against torch.cuda.get_device_name(); NVL boards have lower clocks: unknown here.
PEAKS = (
    ("NVL", None, "unknown peak (NVL board)"),
    ("H100 PCIe", 756.0, "NVIDIA H100 PCIe datasheet: 1,513 TFLOPS BF16 with sparsity, 756 dense"),
    ("H100", 989.4, "NVIDIA H100 SXM datasheet: 1,979 TFLOPS BF16 with sparsity, 989.4 dense"),
    ("H200", 989.4, "NVIDIA H200 datasheet: 1,979 TFLOPS BF16 with sparsity, 989.4 dense"),
)


@dataclass(frozen=True)
class Part:
    """One part of the suite: what it runs, its time box on the GPU, and its Markdown table."""

    run: Callable[[Context, Emit], None]
    box_s: float
    columns: tuple[tuple[str, str, str], ...]  # (header, key of its result's rows, format; "" = str)


@dataclass
class Context:
    device: str  # "cuda" or "cpu"
    sizes: Sizes
    data_dir: str  # the folder holding multi30k/
    checkpoint: str | None  # the main job's checkpoint for the decode part, if given
    work: Path  # scratch space of this suite run (run folders, a cut corpus)


def datasheet_peak(device: str) -> dict:
    """{"tflops", "source", "device"}: the GPU's dense BF16 peak, or tflops None with "unknown peak"."""
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    for fragment, tflops, source in PEAKS:
        if fragment in name:
            return {"tflops": tflops, "source": source, "device": name}
    return {"tflops": None, "source": "unknown peak", "device": name}


def autocast(device: str):
    """bf16 autocast, as attnkit's trainer runs on a GPU (the smoke test takes the same path on CPU)."""
    return lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)


def timing_args(ctx: Context) -> SimpleNamespace:
    s = ctx.sizes
    return SimpleNamespace(
        warmup=s.warmup, repeats=s.repeats, decode_repeats=s.decode_repeats, device=ctx.device
    )


def adapters_of(
    dims: dict, vocab: int, device: str, *, hf: bool, model=None, dropout: float = 0.1, **step: Any
) -> dict:
    """attnkit (a fresh model of ``dims``, or ``model``; ``step``: its training step's ``chunk`` and
    ``compile_backend``) and HF MarianMTModel of the same size, seed 0."""
    from . import peers

    torch.manual_seed(0)
    ids = (vocab, PAD, BOS, EOS)
    attnkit = peers.build("attnkit", *ids, dims=dims, device=device, dropout=dropout, model=model, **step)
    out = {"attnkit": attnkit}
    if hf and "hf" in peers.available():
        marian = peers.module("hf")
        torch.manual_seed(0)
        config = marian.marian_config(*ids, dropout=dropout, **marian_sizes(dims))
        hf_model = marian.MarianMTModel(config)
        out["transformers-marian"] = marian.build(*ids, model=hf_model.to(device))
    return out


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def attention(ctx: Context, emit: Emit) -> None:
    """attnkit's MultiHeadAttention at B x T fixed: fused kernel vs reference math, fwd and fwd+bwd."""
    from attnkit.attention import MultiHeadAttention

    s, dev, amp = ctx.sizes, ctx.device, autocast(ctx.device)
    D, H = s.attn_dims
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).to(dev)
    emit(d_model=D, n_heads=H, tokens=s.attn_tokens, precision="bf16 autocast", mask="no mask")

    def measure(B: int, T: int, need_weights: bool) -> dict:
        x = torch.randn(B, T, D, device=dev, requires_grad=True)

        def forward(_name, _i):
            with torch.no_grad(), amp():
                mha(x, x, x, need_weights=need_weights)

        def forward_backward(_name, _i):
            with amp():
                out, _ = mha(x, x, x, need_weights=need_weights)
            out.float().sum().backward()
            mha.zero_grad(set_to_none=True)
            x.grad = None

        fwd = statistics.median(round_robin(["x"], forward, s.warmup, s.repeats, dev)["x"])
        peak_mib = None
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            forward_backward("x", 0)
            torch.cuda.synchronize()
            peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
        both = statistics.median(round_robin(["x"], forward_backward, s.warmup, s.repeats, dev)["x"])
        times = {"fwd_ms": 1e3 * fwd, "fwd_bwd_ms": 1e3 * both, "peak_mib": peak_mib}
        return {**times, "fwd_tokens_per_s": B * T / fwd, "fwd_bwd_tokens_per_s": B * T / both}

    rows = []
    for T in s.attn_lengths:
        B = max(1, s.attn_tokens // T)
        for path, need_weights in (("fused", False), ("reference", True)):
            row = {"T": T, "B": B, "path": path}
            try:
                row.update(status="ok", **measure(B, T, need_weights))
            except torch.OutOfMemoryError:
                row["status"] = "oom"
            free_memory()
            rows.append(row)
            emit(rows=rows)


def main_job_model(ctx: Context) -> tuple[dict, int, object, str]:
    """(dims, vocabulary, model or None, what it is) of configs/multi30k_de_en_tiny.yaml's model."""
    if ctx.checkpoint:
        from attnkit.checkpoint import load_checkpoint, model_from_checkpoint

        model = model_from_checkpoint(load_checkpoint(ctx.checkpoint))
        c = model.config
        dims = {k: getattr(c, k) for k in BASE}
        return dims, c.tgt_vocab_size, model, f"checkpoint {ctx.checkpoint}"
    from attnkit.train import load_config

    cfg = load_config(ROOT / "configs" / "multi30k_de_en_tiny.yaml")
    dims = {k: cfg.model[k] for k in BASE}
    return dims, cfg.tokenizer.vocab_size, None, "random init (configs/multi30k_de_en_tiny.yaml)"


def compiled_layout(model, *, capture: bool):
    """What ``attnkit translate --compile`` decodes through: the model's step over a fixed layout,
    compiled with CUDA graphs (``capture``, on a GPU); on a CPU the same layout, eagerly."""
    from attnkit.attention import FixedLayout
    from attnkit.decoding.compiled import CompiledDecoding

    return CompiledDecoding(model) if capture else FixedLayout


def graphs_adapter(model, *, capture: bool):
    """attnkit's searches over the compiled fixed-layout step (``capture``: CUDA graphs), as a peer."""
    from attnkit.decoding import beam_search, greedy_search

    from .peers.common import PeerAdapter

    layouts: dict[str, object] = {}  # made once, so every batch of a bucket replays one graph

    def decode(src, beam_size: int = 1, n_tokens: int = 30):
        model.eval()
        layout = layouts.setdefault("layout", compiled_layout(model, capture=capture))
        limit = dict(max_len_a=0, max_len_b=n_tokens + 1, min_len=n_tokens, layout=layout)
        if beam_size == 1:
            hyps = greedy_search(model, src, **limit)
        else:
            hyps = [nbest[0] for nbest in beam_search(model, src, beam_size=beam_size, **limit)]
        return torch.tensor([h.tokens for h in hyps], dtype=torch.long)  # (B, n_tokens)

    notes = "attnkit.decoding.compiled.CompiledDecoding: the model's step compiled, CUDA graphs per bucket"
    return PeerAdapter("attnkit-graphs", "", model, 0, notes, None, decode, (1, 4))


def same_tokens_as_eager(model, src) -> dict:
    """Float32 greedy and beam 4 (free lengths, EOS allowed) through the compiled step against the
    eager searches: the share of sentences with identical tokens, and the largest score difference."""
    from attnkit.decoding import beam_search, greedy_search

    model.eval()
    layout = compiled_layout(model, capture=src.is_cuda)
    with torch.no_grad():
        pairs = [(greedy_search(model, src, layout=layout), greedy_search(model, src))]
        pairs.append(
            ([b[0] for b in beam_search(model, src, layout=layout)], [b[0] for b in beam_search(model, src)])
        )
    same = [[g.tokens == w.tokens for g, w in zip(got, want)] for got, want in pairs]
    gaps = [abs(g.score - w.score) for got, want in pairs for g, w in zip(got, want) if g.tokens == w.tokens]
    gap = max(gaps, default=float("nan"))
    return {
        "greedy same": sum(same[0]) / len(same[0]),
        "beam 4 same": sum(same[1]) / len(same[1]),
        "score gap": gap,
    }


def decode(ctx: Context, emit: Emit) -> None:
    """Greedy and beam 4 sentences/s, fixed length with EOS masked: attnkit eager, attnkit through
    the code ``--compile`` runs (CUDA graphs), HF generate."""
    s, dev, amp = ctx.sizes, ctx.device, autocast(ctx.device)
    dims, vocab, model, weights = main_job_model(ctx)
    models = {
        "main job (tiny config)": (dims, vocab, model, weights),
        "base": (s.base, s.vocab, None, "random init"),
    }
    emit(
        n_tokens=s.n_tokens,
        batch=s.decode_batch,
        source_length=20,
        precision="bf16 autocast",
        graphs="attnkit CUDA graphs: what translate --compile runs (attnkit.decoding.compiled: the "
        "model's fixed-layout step through torch.compile(mode='reduce-overhead'), one graph per bucket); "
        "the same searches' Python between steps. "
        "Same tokens: 64 sentences in float32 without autocast, free lengths, against greedy_search / "
        "beam_search.",
        models={name: {**d, "vocab": v, "weights": w} for name, (d, v, _, w) in models.items()},
    )
    rows: list[dict] = []
    for name, (d, v, m, _) in models.items():
        adapters = adapters_of(d, v, dev, hf=True, model=m)
        adapters["attnkit-graphs"] = graphs_adapter(adapters["attnkit"].model, capture=dev == "cuda")
        src = random_batch(s.decode_batch, 20, seed=1, vocab=v).src.to(dev)
        engines = {
            "attnkit": "attnkit eager",
            "attnkit-graphs": "attnkit CUDA graphs" if dev == "cuda" else "attnkit fixed layout (CPU: eager)",
            "transformers-marian": "HF generate eager",
        }
        cells = {n: {"model": name, "engine": engines[n], "status": "ok"} for n in adapters}
        for beam in (1, 4):
            res = decode_benchmark(adapters, [src], beam, s.n_tokens, timing_args(ctx), amp)
            for n, r in res.items():
                cells[n]["greedy" if beam == 1 else "beam 4"] = r["median"]  # sentences/s
        graphs, eager = cells["attnkit-graphs"], cells["attnkit"]
        graphs.update(same_tokens_as_eager(adapters["attnkit"].model, src[:64]))
        for search in ("greedy", "beam 4"):
            if search in graphs and search in eager:
                graphs[f"{search} vs eager"] = graphs[search] / eager[search]
        rows += cells.values()
        emit(rows=rows)
        del adapters
        free_memory()


PARTS = {
    "attention": Part(
        attention,
        15,
        (
            ("T", "T", ""),
            ("B", "B", ""),
            ("path", "path", ""),
            ("status", "status", ""),
            ("fwd ms", "fwd_ms", ".2f"),
            ("fwd+bwd ms", "fwd_bwd_ms", ".2f"),
            ("fwd+bwd tok/s", "fwd_bwd_tokens_per_s", ",.0f"),
            ("peak MiB", "peak_mib", ",.1f"),
        ),
    ),
    "decode": Part(
        decode,
        60,
        (
            ("model", "model", ""),
            ("engine", "engine", ""),
            ("status", "status", ""),
            ("greedy sent/s", "greedy", ",.1f"),
            ("beam 4 sent/s", "beam 4", ",.1f"),
            ("greedy vs eager", "greedy vs eager", ".2f"),
            ("beam 4 vs eager", "beam 4 vs eager", ".2f"),
            ("greedy same tokens (fp32)", "greedy same", ".0%"),
            ("beam 4 same tokens (fp32)", "beam 4 same", ".0%"),
            ("largest score gap", "score gap", ".1e"),
        ),
    ),
}
