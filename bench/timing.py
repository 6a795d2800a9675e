"""Timing: peers take turns step by step (round robin), training and decoding rates, FLOPs and MFU.

Every rate is a list of samples (one per timed step) summarized as median and best-of-N; ratios to
attnkit are taken in the same run, so the host's noise (about +-25% here) hits every peer alike.
"""

from __future__ import annotations

import statistics
import time

import torch

from attnkit.attention import MultiHeadAttention
from attnkit.data.batching import Batch

from .peers.common import EOS, VOCAB

ADAM = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
OPTIMIZER = "torch.optim.Adam(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True), as attnkit's trainer"


def train_flops(B: int, S: int, T: int, d_model: int, d_ff: int, n_enc: int, n_dec: int, vocab: int) -> float:
    """FLOPs of one training step on a padded (B, S, T) batch: 6 x the forward's multiply-adds.

    Counts only matmuls (the usual MFU convention; 2 FLOPs per multiply-add, backward = 2 x forward):
    encoder layer: Q/K/V/O projections 4*S*D^2, scores QK^T and AV 2*S^2*D, FFN 2*S*D*F;
    decoder layer: self-attention 4*T*D^2 + 2*T^2*D (the full square, as the kernels compute it),
    cross-attention Q/O 2*T*D^2 + K/V of the memory 2*S*D^2 + QK^T, AV 2*T*S*D, FFN 2*T*D*F;
    output projection T*D*V. Padding counts: it is work the model really does.
    """
    D, F = d_model, d_ff
    enc = 4 * S * D * D + 2 * S * S * D + 2 * S * D * F
    dec = 4 * T * D * D + 2 * T * T * D + 2 * T * D * D + 2 * S * D * D + 2 * T * S * D + 2 * T * D * F
    return 6.0 * B * (n_enc * enc + n_dec * dec + T * D * vocab)


def peak_flops(device: str, dtype: torch.dtype, n: int, repeats: int = 10) -> tuple[float, float]:
    """(best, median) FLOP/s of an n x n x n matmul with this process's thread count.

    The best is the MFU denominator: a busy host only ever slows the matmul down, and a median
    taken while other work runs would understate the peak (MFU above 100% on a loaded host).
    """
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    times = round_robin(["matmul"], lambda name, i: a @ b, 1, repeats, device)["matmul"]
    return 2 * n**3 / min(times), 2 * n**3 / statistics.median(times)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def round_robin(names: list[str], step, n_warmup: int, n_repeats: int, device: str) -> dict[str, list[float]]:
    """Seconds of step(name, i) per peer, the peers taking turns at every i so that slow phases of
    a noisy host hit all of them alike; the first n_warmup rounds are dropped."""
    times = {name: [] for name in names}
    for i in range(n_warmup + n_repeats):
        for name in names:
            sync(device)
            t0 = time.perf_counter()
            step(name, i)
            sync(device)
            if i >= n_warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def summarize(samples: list[float], **extra) -> dict:
    """Median and best of rates (higher is better), with the samples and any extra fields."""
    return {"median": statistics.median(samples), "best": max(samples), "samples": samples, **extra}


def train_benchmark(adapters: dict, batches: list[Batch], dims: dict, args, amp, vocab: int = VOCAB) -> dict:
    """Target tokens/s and MFU of forward + loss + backward + Adam step, round-robin over peers
    (``vocab``: the shared vocabulary, for the output layer's FLOPs)."""
    names = [n for n, a in adapters.items() if a.train_step_fn is not None]
    opts = {n: torch.optim.Adam(adapters[n].parameters(), **ADAM) for n in names}

    def step(name, i):
        b = batches[i % len(batches)]
        with amp():
            loss = adapters[name].train_step_fn(b.src, b.tgt_in, b.tgt_out)
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            raise RuntimeError(f"{name}: non-finite loss {float(loss)}")

    times = round_robin(names, step, args.warmup, args.repeats, args.device)
    model = [dims["d_model"], dims["d_ff"], dims["n_encoder_layers"], dims["n_decoder_layers"], vocab]
    out = {}
    for name, ts in times.items():
        used = [batches[(args.warmup + k) % len(batches)] for k in range(len(ts))]
        flops = [train_flops(b.src.size(0), b.src.size(1), b.tgt_in.size(1), *model) for b in used]
        tok_s = [b.n_tgt_tokens / t for b, t in zip(used, ts)]
        out[name] = summarize(tok_s, step_flops=flops, step_s=ts)
    return out


def add_mfu(train: dict, peak: float) -> None:
    """Model FLOPs utilization of every training step against the machine's matmul peak."""
    for result in train.values():
        for r in result.values():
            mfu = [f / t / peak for f, t in zip(r["step_flops"], r["step_s"])]
            r.update(mfu_median=statistics.median(mfu), mfu_best=max(mfu))


def decode_benchmark(adapters: dict, sources: list, beam: int, n_tokens: int, args, amp) -> dict:
    """Sentences/s decoding all ``sources`` batches, exactly n_tokens tokens each, round-robin."""
    names = [n for n, a in adapters.items() if a.decode_fn is not None and beam in a.decode_beams]

    def step(name, i):
        for src in sources:
            with amp():
                out = adapters[name].decode_fn(src, beam_size=beam, n_tokens=n_tokens)
            if tuple(out.shape) != (src.size(0), n_tokens) or bool((out == EOS).any()):
                raise RuntimeError(f"{name} beam {beam}: output {tuple(out.shape)} is not {n_tokens} tokens")

    times = round_robin(names, step, min(args.warmup, 1), args.decode_repeats, args.device)
    n_sent = sum(src.size(0) for src in sources)
    return {name: summarize([n_sent / t for t in ts]) for name, ts in times.items()}


def attention_memory(lengths=(512, 1024, 2048, 4096, 8192), d_model=512, n_heads=8) -> list[dict]:
    """Peak extra GPU memory (MiB) of one self-attention forward + backward, bf16 autocast, batch 1.

    The fused path (F.scaled_dot_product_attention, no mask) never stores the T x T weights, so it
    should grow linearly in T; need_weights=True runs the reference math that does (quadratic),
    shown for contrast until it runs out of memory.
    """
    mha = MultiHeadAttention(d_model, n_heads).cuda()

    def peak_mib(T: int, need_weights: bool) -> float | None:
        torch.cuda.empty_cache()
        x = torch.randn(1, T, d_model, device="cuda", requires_grad=True)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out, _ = mha(x, x, x, need_weights=need_weights)
            out.float().sum().backward()
            return (torch.cuda.max_memory_allocated() - base) / 2**20
        except torch.OutOfMemoryError:
            return None
        finally:
            mha.zero_grad(set_to_none=True)

    peak_mib(lengths[0], False)  # first call allocates cuBLAS workspaces: keep them out of the table
    return [
        {"seq_len": T, "fused_mib": peak_mib(T, False), "reference_mib": peak_mib(T, True)} for T in lengths
    ]
