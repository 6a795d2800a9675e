"""Speed of attnkit against peer toolkits on the same Transformer: training, MFU and decoding.

    python -m bench.speed [--peers attnkit,torch,hf,joeynmt,opennmt,ct2] [--repeats 20] [--warmup 3]
                          [--decode-repeats 5] [--threads N] [--quick] [--data-dir /work/shared/data]
                          [--out bench/results/speed.json] [--markdown bench/results/speed.md]
    python -m bench.speed --device cuda      # the paper's base model in bf16 on a GPU, attnkit vs HF

Run from the repository root. CPU: the reference model of bench/peers/common.py (d_model 256,
4 heads, FFN 1024, 3+3 layers, shared vocabulary 8000, dropout 0.1, tied embeddings). Every number
is also given as a ratio to attnkit *in the same run* (peer / attnkit, > 1 = faster than attnkit):
the peers take turns step by step, so the host's noise (about +-25% here) hits all of them alike.
Medians of the timed steps after warm-up, and best-of-N. CTranslate2 runs in a process of its own
(bench/speed_worker_ct2.py) while this one waits: its OpenMP pool would otherwise compete with
torch's for the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from dataclasses import asdict

import torch

from attnkit.denormals import flush_for_this_thread

from . import peers
from .peers.common import BASE, BOS, EOS, PAD, REFERENCE, VOCAB, marian_sizes
from .report import add_ratios, machine_info, markdown, progress
from .speed_worker_ct2 import run_ct2
from .timing import (
    OPTIMIZER,
    add_mfu,
    attention_memory,
    decode_benchmark,
    peak_flops,
    summarize,
    train_benchmark,
)
from .workloads import SIZES, multi30k_data, random_batch

CHOICES = list(peers.PEERS)  # attnkit, torch, hf, joeynmt, opennmt, ct2
MARIAN_BASE = marian_sizes(BASE)
NOTES = [
    "Training: random batch without padding, and the first Multi30k train de-en batches of "
    "TokenBatchSampler(max_tokens, shuffle, seed 1) after attnkit's joint SentencePiece (8000), cycled "
    "in the same order for every peer.",
    "Decoding: exactly n_tokens output tokens per sentence (EOS masked until then): equal work despite "
    "random weights. test2016 = the first German test_2016_flickr sentences (attnkit tokenizer ids, "
    "real source lengths).",
    "CTranslate2 runs in its own process (intra_threads = torch threads) after the others, not "
    "interleaved with them, so host drift between phases is not cancelled for it.",
    "MFU = train_flops(B, S, T) (6 x matmul multiply-adds, padded shapes) / step time / matmul peak.",
    "Denormals flushed to zero (attnkit.denormals.flush_for_this_thread) for every peer, from the start.",
]


def build_adapters(keys: list[str], device: str) -> tuple[dict, list[str]]:
    """The in-process adapters (attnkit first, same seed for each) and why peers were skipped."""
    torch.manual_seed(0)
    dims = BASE if device == "cuda" else REFERENCE
    reference = peers.build("attnkit", VOCAB, PAD, BOS, EOS, dims=dims, device=device)
    adapters, skipped, available = {reference.name: reference}, [], peers.available()
    for key in (k for k in keys if k not in ("attnkit", "ct2")):
        if key not in available:
            skipped.append(f"{key}: package not installed")
        elif device == "cuda" and key != "hf":
            skipped.append(f"{key}: not run with --device cuda (the GPU run compares attnkit with HF)")
        else:
            torch.manual_seed(0)
            if device == "cuda":  # the paper's base model as a MarianMTModel
                marian = peers.module("hf")
                model = marian.MarianMTModel(marian.marian_config(VOCAB, PAD, BOS, EOS, **MARIAN_BASE))
                adapter = marian.build(VOCAB, PAD, BOS, EOS, model=model)
                adapter.notes = "Paper base size (d 512, 8 heads, FFN 2048, 6+6 layers). " + adapter.notes
            else:
                adapter = peers.build(key, VOCAB, PAD, BOS, EOS)
            adapter.model.to(device)
            adapters[adapter.name] = adapter
    return adapters, skipped


def add_ct2(results: dict, adapters: dict, decode_sets: dict, n_tokens: int, args) -> None:
    """CTranslate2 float32 + int8 timings (own process) on the HF peer's weights, into ``results``."""
    hf = adapters.get("transformers-marian")
    marian = hf.model if hf else peers.module("hf").build_marian_model(VOCAB, PAD, BOS, EOS, seed=0)
    timings = run_ct2(
        marian, decode_sets, n_tokens, warmup=min(args.warmup, 1), repeats=args.decode_repeats, eos_id=EOS
    )
    for r in timings.values():
        results["peers"][r["name"]] = {k: r[k] for k in ("version", "n_params", "notes")}
        for label, samples in r["decode"].items():
            results["decode"][label][r["name"]] = summarize(samples)
    print("ctranslate2: done", flush=True)


def run(args, keys: list[str]) -> dict:
    """All measurements of one mode (cpu, quick or cuda) as the results dictionary."""
    cuda, sizes = args.device == "cuda", SIZES["quick" if args.quick else args.device]
    dims, peak_dtype = (BASE, torch.bfloat16) if cuda else (REFERENCE, torch.float32)
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else nullcontext
    adapters, skipped = build_adapters(keys, args.device)
    print(f"peers: {', '.join(adapters)}; skipped: {'; '.join(skipped) or 'none'}", flush=True)
    peak, peak_median = peak_flops(args.device, peak_dtype, sizes.peak_n)
    print(f"matmul peak ({peak_dtype}, {sizes.peak_n}^3): {peak / 1e9:,.1f} GFLOP/s", flush=True)
    real_batches, test_src, data = multi30k_data(args.data_dir, sizes)

    B, L = sizes.train_batch
    train_sets = {f"random {B}x{L}": [random_batch(B, L)], f"Multi30k {sizes.max_tokens}-token": real_batches}
    train = {}
    for label, batches in train_sets.items():
        batches = [b.to(args.device) for b in batches]
        train[label] = progress(label, train_benchmark(adapters, batches, dims, args, amp), "tok/s")

    # The peak again after the training phase: one slow phase of the host must not inflate MFU.
    peak_before = peak
    peak_after, _ = peak_flops(args.device, peak_dtype, sizes.peak_n)
    print(f"matmul peak after training: {peak_after / 1e9:,.1f} GFLOP/s", flush=True)
    peak = max(peak, peak_after)
    add_mfu(train, peak)

    n_dec = sizes.decode_batch
    sources = {
        f"random {n_dec}x20": [random_batch(n_dec, 20, seed=1).src],
        f"test2016 {data['test_sentences']}": test_src,
    }
    decode_sets = {
        f"{kind} {'greedy' if k == 1 else f'beam {k}'}": (k, srcs)
        for kind, srcs in sources.items()
        for k in (1, 4)
    }
    decode = {}
    for label, (beam, srcs) in decode_sets.items():
        srcs = [s.to(args.device) for s in srcs]
        res = decode_benchmark(adapters, srcs, beam, sizes.n_tokens, args, amp)
        decode[label] = progress(label, res, "sent/s")

    peer_info = {n: dict(version=a.version, n_params=a.n_params, notes=a.notes) for n, a in adapters.items()}
    shapes = data["train_batches_B_S_T_tokens"]
    notes = [
        *NOTES,
        f"Multi30k training batches (B, S, T, target tokens): {shapes}; "
        f"decoding batches of {sizes.decode_batch} sentences.",
        *skipped,
    ]
    settings = dict(
        mode="quick" if args.quick else args.device,
        repeats=args.repeats,
        warmup=args.warmup,
        decode_repeats=args.decode_repeats,
        sizes=asdict(sizes),
        peak_dtype=str(peak_dtype),
        model=dims,
        optimizer=OPTIMIZER,
        data=data,
        notes=notes,
    )
    results = dict(
        machine=machine_info(args.device),
        settings=settings,
        peak_gflops=peak / 1e9,
        peak_gflops_before=peak_before / 1e9,
        peak_gflops_after=peak_after / 1e9,
        peak_gflops_median_before=peak_median / 1e9,
        peers=peer_info,
        train=train,
        decode=decode,
        attention_memory=None,
    )
    if "ct2" in keys and cuda:
        notes.append("ct2: CPU only in this benchmark (not run with --device cuda)")
    elif "ct2" in keys and "ct2" not in peers.available():
        notes.append("ct2: package not installed")
    elif "ct2" in keys:
        add_ct2(results, adapters, decode_sets, sizes.n_tokens, args)
    if cuda:
        notes.append("GPU: the paper's base model (d 512, 8 heads, FFN 2048, 6+6 layers, vocab 8000), bf16.")
        results["attention_memory"] = attention_memory()
    add_ratios(train)
    add_ratios(decode)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--peers",
        default=",".join(CHOICES),
        help="comma list of " + ",".join(CHOICES) + " (default: all installed; "
        "attnkit always runs: it is the reference of every ratio)",
    )
    ap.add_argument("--repeats", type=int, default=20, help="timed training steps per peer and batch kind")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds first (decoding: at most 1)")
    ap.add_argument("--decode-repeats", type=int, default=5, help="timed decoding rounds per setting")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CT2 gets the same)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--data-dir", default=None, help="folder holding multi30k/ (default: attnkit's)")
    ap.add_argument("--out", default="bench/results/speed.json")
    ap.add_argument("--markdown", default="bench/results/speed.md")
    args = ap.parse_args(argv)
    try:
        keys = [peers.resolve(k.strip()) for k in args.peers.split(",") if k.strip()]
    except ValueError as e:
        ap.error(str(e))
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here; skipping the GPU benchmark", file=sys.stderr)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    flush_for_this_thread()  # the benchmark's threads only compute: the same for every peer

    results = run(args, keys)
    results["markdown"] = text = markdown(results)
    print("\n" + text)
    for path, content in ((args.out, json.dumps(results, indent=1)), (args.markdown, text)):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)
    print(f"wrote {args.out} and {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
