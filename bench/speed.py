"""Speed of attnkit against peer toolkits on the same Transformer: training, MFU and decoding.

    python bench/speed.py [--peers attnkit,torch,hf,joeynmt,opennmt,ct2] [--repeats 20] [--warmup 3]
                          [--decode-repeats 5] [--threads N] [--quick] [--data-dir /work/shared/data]
                          [--out bench/results/speed.json] [--markdown bench/results/speed.md]
    python bench/speed.py --device cuda      # the paper's base model in bf16 on a GPU, attnkit vs HF

CPU: the small model of bench/peers.py (d_model 256, 4 heads, FFN 1024, 3+3 layers, shared vocabulary
8000, dropout 0.1, tied embeddings). Every number is also given as a ratio to attnkit *in the same
run* (peer / attnkit, > 1 = faster than attnkit): the peers take turns step by step, so the host's
noise (about +-25% here) hits all of them alike. Medians of the timed steps after warm-up, and
best-of-N. CTranslate2 runs in a process of its own (bench/speed_worker_ct2.py) while this one
waits: its OpenMP pool would otherwise compete with torch's for the same cores.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

from attnkit.attention import MultiHeadAttention  # noqa: E402
from attnkit.data.batching import Batch, TokenBatchSampler, collate  # noqa: E402
from attnkit.data.multi30k import load_multi30k  # noqa: E402
from attnkit.data.tokenizer import SubwordTokenizer  # noqa: E402
from attnkit.decoding import beam_search, greedy_search  # noqa: E402
from attnkit.loss import label_smoothed_cross_entropy  # noqa: E402
from attnkit.model import Transformer, TransformerConfig, count_parameters  # noqa: E402

PAD, BOS, EOS, VOCAB = 0, 1, 2, 8000
# CLI name -> key of peers.BUILDERS
PEER_KEYS = dict(torch="torch", hf="transformers", joeynmt="joeynmt", opennmt="opennmt", ct2="ctranslate2")
SMALL = dict(d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3)
BASE = dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6)  # paper Table 3
MARIAN_BASE = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                   decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                   init_std=512**-0.5)  # fmt: skip
OPTIMIZER = "torch.optim.Adam(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True), as attnkit's trainer"
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
    "torch.set_flush_denormal(True) for every peer, as attnkit's trainer does.",
]
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speed_worker_ct2.py")


@dataclass
class Sizes:
    """Workload of one mode: the issue's CPU benchmark, a tiny smoke test, or the GPU one."""

    train_batch: tuple[int, int]  # (B, length) of the random training batch
    max_tokens: int  # token budget of the Multi30k training batches
    n_real_batches: int  # how many of those batches every peer cycles through
    decode_batch: int  # sentences per decoding call
    n_tokens: int  # output tokens per sentence (EOS disabled until then)
    n_test: int  # test_2016_flickr sentences decoded per repeat
    peak_n: int  # matmul size for the peak FLOP/s measurement


SIZES = {
    "cpu": Sizes((64, 20), 4096, 4, 64, 30, 256, 2048),
    "quick": Sizes((8, 20), 512, 2, 8, 10, 16, 1024),
    "cuda": Sizes((256, 32), 16384, 4, 256, 30, 1000, 8192),
}


# --- attnkit behind the peers' adapter interface ---------------------------------------------


class FixedLength:
    """attnkit's seq2seq interface with EOS forbidden until ``n_tokens`` tokens are decoded.

    The searches already ban pad and bos. With EOS masked while the cache holds fewer than
    ``n_tokens`` positions and the length limit ``max_len_b = n_tokens + 1`` (EOS included), the
    limit forces EOS right after token ``n_tokens``: every hypothesis has exactly ``n_tokens``
    tokens, so attnkit does the same work as the peers' min = max length settings.
    """

    def __init__(self, model: Transformer, n_tokens: int):
        self.model, self.n_tokens, self.config = model, n_tokens, model.config
        self.encode, self.init_cache = model.encode, model.init_cache

    def decode(self, tgt, enc, *, cache, need_weights=False):
        position = len(cache)  # positions decoded before this step (bos is position 0)
        out = self.model.decode(tgt, enc, cache=cache, need_weights=need_weights)
        if position < self.n_tokens:  # this step predicts token number position + 1 <= n_tokens
            out.logits[..., self.config.eos_id] = float("-inf")
        return out


def attnkit_adapter(dims: dict, device: str) -> peers.PeerAdapter:
    """attnkit's Transformer with the same train-step and decode signatures as the peers."""
    cfg = TransformerConfig(
        **dims, dropout=0.1, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, share_vocab=True, tie_output=True
    )
    model = Transformer(cfg).to(device)

    def train_step(src, tgt_in, tgt_out):
        model.train()
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, pad_id=PAD)
        loss = out.loss / out.n_tokens
        loss.backward()
        return loss.detach()

    def decode(src, beam_size=1, n_tokens=30):
        model.eval()
        fixed, limit = FixedLength(model, n_tokens), dict(max_len_a=0, max_len_b=n_tokens + 1)
        if beam_size == 1:
            hyps = greedy_search(fixed, src, **limit)
        else:
            hyps = [nbest[0] for nbest in beam_search(fixed, src, beam_size=beam_size, **limit)]
        return torch.tensor([h.tokens for h in hyps], dtype=torch.long)

    notes = (
        "attnkit Transformer (post-norm, sinusoidal, ReLU, biases, shared + tied embeddings), "
        "label_smoothed_cross_entropy; decoding with greedy_search / beam_search (KV cache, finished "
        "sentences leave the batch) through a wrapper that masks EOS until n_tokens."
    )
    version, n_params = importlib.metadata.version("attnkit"), count_parameters(model)
    return peers.PeerAdapter("attnkit", version, model, n_params, notes, train_step, decode, (1, 4))


def build_adapters(keys: list[str], device: str) -> tuple[dict, list[str]]:
    """The in-process adapters (attnkit first, same seed for each) and why peers were skipped."""
    torch.manual_seed(0)
    adapters, skipped = {"attnkit": attnkit_adapter(BASE if device == "cuda" else SMALL, device)}, []
    available = peers.available_builders()
    for key in (k for k in keys if k not in ("attnkit", "ct2")):
        if PEER_KEYS[key] not in available:
            skipped.append(f"{key}: package not installed")
        elif device == "cuda" and key != "hf":
            skipped.append(f"{key}: not run with --device cuda (the GPU run compares attnkit with HF)")
        else:
            torch.manual_seed(0)
            if device == "cuda":  # the paper's base model as a MarianMTModel
                from transformers import MarianMTModel

                model = MarianMTModel(peers.marian_config(VOCAB, PAD, BOS, EOS, **MARIAN_BASE))
                adapter = peers.build_hf_marian(VOCAB, PAD, BOS, EOS, model=model)
                adapter.notes = "Paper base size (d 512, 8 heads, FFN 2048, 6+6 layers). " + adapter.notes
            else:
                adapter = peers.BUILDERS[PEER_KEYS[key]](VOCAB, PAD, BOS, EOS)
            adapter.model.to(device)
            adapters[adapter.name] = adapter
    return adapters, skipped


# --- data: random tokens and Multi30k ---------------------------------------------------------


def random_batch(batch: int, length: int, seed: int = 0) -> Batch:
    """batch x length random ids >= 3 on both sides, no padding: tgt_in = bos + y, tgt_out = y + eos."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, length), generator=g)
    y = torch.randint(3, VOCAB, (batch, length - 1), generator=g)
    return collate(list(zip(src.tolist(), y.tolist())), pad_id=PAD, bos_id=BOS, eos_id=EOS)


def multi30k_data(data_dir: str | None, sizes: Sizes) -> tuple[list[Batch], list[torch.Tensor], dict]:
    """Real batches: attnkit's joint SentencePiece (8000) trained on Multi30k train de-en.

    Training uses the first ``n_real_batches`` token-budget batches of ``TokenBatchSampler``
    (shuffled, seed 1) for every peer; decoding the first ``n_test`` German sentences of
    test_2016_flickr in batches of ``decode_batch`` (right-padded, in corpus order).
    """
    train = load_multi30k("train", "de", "en", data_dir=data_dir)
    src_text, tgt_text = [s for s, _ in train], [t for _, t in train]
    tok = SubwordTokenizer.train(src_text, tgt_text, vocab_size=VOCAB, joint=True)
    src_ids, tgt_ids = tok.encode_batch(src_text, "src"), tok.encode_batch(tgt_text, "tgt")
    lengths = [(len(s), len(t)) for s, t in zip(src_ids, tgt_ids)]
    sampler = TokenBatchSampler(lengths, max_tokens=sizes.max_tokens, shuffle=True, seed=1)
    chosen = itertools.islice(iter(sampler), sizes.n_real_batches)
    batches = [collate([(src_ids[i], tgt_ids[i]) for i in idx]) for idx in chosen]
    test = load_multi30k("test_2016_flickr", "de", "en", data_dir=data_dir)[: sizes.n_test]
    test_ids, B = tok.encode_batch([s for s, _ in test], "src"), sizes.decode_batch
    test_src = [collate([(s, []) for s in test_ids[i : i + B]]).src for i in range(0, len(test_ids), B)]
    shapes = [(*b.src.shape, b.tgt_in.size(1), b.n_tgt_tokens) for b in batches]  # (B, S, T, tokens)
    return batches, test_src, {"train_batches_B_S_T_tokens": shapes, "test_sentences": len(test_ids)}


# --- FLOPs and the machine's peak -------------------------------------------------------------


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


# --- timing -----------------------------------------------------------------------------------


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
    return {"median": statistics.median(samples), "best": max(samples), "samples": samples, **extra}


def train_benchmark(adapters: dict, batches: list[Batch], dims: dict, args, amp) -> dict:
    """Target tokens/s and MFU of forward + loss + backward + Adam step, round-robin over peers."""
    names = [n for n, a in adapters.items() if a.train_step_fn is not None]
    adam = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    opts = {n: torch.optim.Adam(adapters[n].parameters(), **adam) for n in names}

    def step(name, i):
        b = batches[i % len(batches)]
        with amp():
            loss = adapters[name].train_step_fn(b.src, b.tgt_in, b.tgt_out)
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            raise RuntimeError(f"{name}: non-finite loss {float(loss)}")

    times = round_robin(names, step, args.warmup, args.repeats, args.device)
    model = [dims["d_model"], dims["d_ff"], dims["n_encoder_layers"], dims["n_decoder_layers"], VOCAB]
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


def run_ct2(marian_model, decode_sets: dict, n_tokens: int, args) -> dict:
    """Time CTranslate2 float32 and int8 in bench/speed_worker_ct2.py; this process waits idle.

    The worker gets the Marian weights (the HF peer's, when it runs) and the token ids in a
    temporary job file, converts with peers.build_ctranslate2 and prints its timings as JSON.
    """
    settings = [dict(label=label, beam=beam, sources=srcs) for label, (beam, srcs) in decode_sets.items()]
    with tempfile.TemporaryDirectory(prefix="attnkit-speed-") as tmp:
        marian_dir, job_path = os.path.join(tmp, "marian"), os.path.join(tmp, "job.pt")
        marian_model.save_pretrained(marian_dir)
        job = dict(marian_dir=marian_dir, threads=torch.get_num_threads(), compute_types=["float32", "int8"],
                   n_tokens=n_tokens, warmup=min(args.warmup, 1), repeats=args.decode_repeats, eos_id=EOS,
                   settings=settings)  # fmt: skip
        torch.save(job, job_path)
        proc = subprocess.run([sys.executable, WORKER, job_path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"CTranslate2 worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


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


# --- report -----------------------------------------------------------------------------------


def machine_info(device: str) -> dict:
    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    versions = {}
    for dist in ("attnkit", "torch", "transformers", "joeynmt", "OpenNMT-py", "ctranslate2"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    info = dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), date=date,
                python=platform.python_version(), versions=versions)  # fmt: skip
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def progress(label: str, res: dict, unit: str) -> dict:
    """Print one setting's medians as soon as it is measured (a full run takes a while)."""
    print(f"{label}: " + ", ".join(f"{n} {r['median']:,.1f} {unit}" for n, r in res.items()), flush=True)
    return res


def add_ratios(section: dict) -> None:
    """Each peer's median and best-of-N as ratios to attnkit's in the same setting."""
    for res in section.values():
        base = res["attnkit"]
        for r in res.values():
            r["ratio_median"], r["ratio_best"] = r["median"] / base["median"], r["best"] / base["best"]


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def markdown(results: dict) -> str:
    """The report: training and decoding tables (value, ratio of medians, ratio of bests), notes."""
    m, s, peer_info = results["machine"], results["settings"], results["peers"]
    train, decode = results["train"], results["decode"]

    def cell(res, name, fmt):
        if (r := res.get(name)) is None:
            return "n/a"
        return f"{r['median']:{fmt}} ({r['ratio_median']:.2f}x, best {r['ratio_best']:.2f}x)"

    lines = [f"# attnkit speed benchmark ({s['mode']})", "",
             f"{m.get('gpu', m['cpu'])}, {m['cores']} CPU cores, torch threads {m['torch_threads']}, "
             f"{m['date']}; {s['peak_dtype']} matmul peak (best of 10, before and after training) "
             f"{results['peak_gflops']:,.1f} GFLOP/s.",
             "",
             "Cells: median (median ratio peer/attnkit, best-of-N ratio); > 1x = faster than attnkit. "
             f"Every trainable peer: {OPTIMIZER}; the same label-smoothed loss (peers: F.cross_entropy with "
             "label_smoothing=0.1; attnkit: its own, same value).", "",
             "## Training, target tokens/s (forward + backward + optimizer step)", ""]  # fmt: skip
    header = ["peer", "params", *train, *(f"MFU {label}" for label in train)]
    rows = [[n, f"{peer_info[n]['n_params']:,}", *(cell(r, n, ",.0f") for r in train.values()),
             *(f"{r[n]['mfu_median']:.1%}" if n in r else "n/a" for r in train.values())]
            for n in peer_info if any(n in r for r in train.values())]  # fmt: skip
    lines += md_table(header, rows)
    lines += ["", f"## Decoding, sentences/s ({s['sizes']['n_tokens']} tokens each, EOS disabled)", ""]
    rows = [[n, *(cell(r, n, ",.1f") for r in decode.values())] for n in peer_info]
    lines += md_table(["peer", *decode], rows)
    if results["attention_memory"]:
        lines += ["", "## Peak self-attention memory, MiB (forward + backward, bf16, batch 1, d 512)", ""]
        rows, prev = [], None
        for row in results["attention_memory"]:
            f, r = row["fused_mib"], row["reference_mib"]
            growth = f"{f / prev:.2f}x" if f and prev else "-"
            rows.append([str(row["seq_len"]), "OOM" if f is None else f"{f:,.1f}", growth,
                         "OOM" if r is None else f"{r:,.1f}"])  # fmt: skip
            prev = f
        lines += md_table(["T", "fused", "fused vs T/2", "reference (weights stored)"], rows)
    lines += ["", "## Notes", "", *(f"- **{n}** {p['version']}: {p['notes']}" for n, p in peer_info.items())]
    return "\n".join(lines + [f"- {note}" for note in s["notes"]]) + "\n"


# --- main -------------------------------------------------------------------------------------


def add_ct2(results: dict, adapters: dict, decode_sets: dict, n_tokens: int, args) -> None:
    """CTranslate2 float32 + int8 timings (own process) on the HF peer's weights, into ``results``."""
    hf = adapters.get("transformers-marian")
    marian = hf.model if hf else peers.build_marian_model(VOCAB, PAD, BOS, EOS, seed=0)
    for r in run_ct2(marian, decode_sets, n_tokens, args).values():
        results["peers"][r["name"]] = {k: r[k] for k in ("version", "n_params", "notes")}
        for label, samples in r["decode"].items():
            results["decode"][label][r["name"]] = summarize(samples)
    print("ctranslate2: done", flush=True)


def run(args, keys: list[str]) -> dict:
    """All measurements of one mode (cpu, quick or cuda) as the results dictionary."""
    cuda, sizes = args.device == "cuda", SIZES["quick" if args.quick else args.device]
    dims, peak_dtype = (BASE, torch.bfloat16) if cuda else (SMALL, torch.float32)
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
    decode_sets = {f"{kind} {'greedy' if k == 1 else f'beam {k}'}": (k, srcs)
                   for kind, srcs in sources.items() for k in (1, 4)}  # fmt: skip
    decode = {}
    for label, (beam, srcs) in decode_sets.items():
        srcs = [s.to(args.device) for s in srcs]
        res = decode_benchmark(adapters, srcs, beam, sizes.n_tokens, args, amp)
        decode[label] = progress(label, res, "sent/s")

    peer_info = {n: dict(version=a.version, n_params=a.n_params, notes=a.notes) for n, a in adapters.items()}
    shapes = data["train_batches_B_S_T_tokens"]
    notes = [*NOTES, f"Multi30k training batches (B, S, T, target tokens): {shapes}; "
             f"decoding batches of {sizes.decode_batch} sentences.", *skipped]  # fmt: skip
    settings = dict(mode="quick" if args.quick else args.device, repeats=args.repeats, warmup=args.warmup,
                    decode_repeats=args.decode_repeats, sizes=asdict(sizes), peak_dtype=str(peak_dtype),
                    model=dims, optimizer=OPTIMIZER, data=data, notes=notes)  # fmt: skip
    results = dict(machine=machine_info(args.device), settings=settings, peak_gflops=peak / 1e9,
                   peak_gflops_before=peak_before / 1e9, peak_gflops_after=peak_after / 1e9,
                   peak_gflops_median_before=peak_median / 1e9, peers=peer_info, train=train, decode=decode,
                   attention_memory=None)  # fmt: skip
    if "ct2" in keys and cuda:
        notes.append("ct2: CPU only in this benchmark (not run with --device cuda)")
    elif "ct2" in keys and PEER_KEYS["ct2"] not in peers.available_builders():
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
    ap.add_argument("--peers", default=",".join(["attnkit", *PEER_KEYS]),
                    help="comma list of attnkit," + ",".join(PEER_KEYS) + " (default: all installed; "
                    "attnkit always runs: it is the reference of every ratio)")  # fmt: skip
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
    keys = [k.strip() for k in args.peers.split(",") if k.strip()]
    if unknown := [k for k in keys if k != "attnkit" and k not in PEER_KEYS]:
        ap.error(f"unknown peers {unknown}")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here; skipping the GPU benchmark", file=sys.stderr)
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # process-wide, so the same for every peer

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
