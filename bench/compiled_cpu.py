"""Compiled decoding on a CPU against eager decoding: the measurement behind ``--compile``'s refusal.

The same searches (``greedy_search``, ``beam_search``) four ways: ``eager`` (growing caches),
``eager-packed`` (the same with the decoding weights packed, ``attnkit.fast.packed_linears``: what
``Translator.translate`` runs, the users' eager path), ``layout`` (the model's step over the fixed
layout, eagerly) and ``inductor`` (that step compiled by
``attnkit.decoding.compiled.CompiledDecoding``, what ``--compile`` runs, Inductor with
``cpp_wrapper`` and ``freezing``). The main job's model size with random weights, every sentence
decoding 30 tokens, one thread; sentences per CPU-second, best of ``--repeats``, the first call
(which compiles) timed apart. ``--compile`` is offered on a CPU only where ``inductor`` reaches 1.2x
eager for one sentence and 1.0x at batches of 16 and 64, greedy and beam 4.

    OMP_NUM_THREADS=1 python -m bench.compiled_cpu [--batches 1,16,64] [--beam 0] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnkit.attention import FixedLayout
from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.common import Hypothesis
from attnkit.decoding.compiled import CompiledDecoding
from attnkit.fast import packed_linears
from attnkit.model import Transformer, TransformerConfig

from .report import machine_info

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 30  # tokens before eos in every sentence
ENGINES = ("eager", "eager-packed", "layout", "inductor")
SEARCH = dict(min_len=TOKENS, max_len_a=0.0, max_len_b=TOKENS + 1)


def bench_model() -> Transformer:
    cfg = TransformerConfig(
        d_model=128,
        n_heads=4,
        d_ff=512,
        n_encoder_layers=2,
        n_decoder_layers=2,
        src_vocab_size=4000,
        tgt_vocab_size=4000,
        dropout=0.0,
        max_len=256,
    )
    torch.manual_seed(0)
    return Transformer(cfg).eval()


def searcher(model: Transformer, engine: str, beam: int) -> Callable[[torch.Tensor], list]:
    """src (B, S) -> the best hypothesis of each sentence, by ``engine``."""
    layout = None
    if engine == "layout":
        layout = FixedLayout
    elif engine == "inductor":
        torch._dynamo.reset()  # its first call is its compile time
        layout = CompiledDecoding(model, options={"cpp_wrapper": True, "freezing": True})
    if beam:
        search = lambda src: [h[0] for h in beam_search(model, src, beam_size=beam, layout=layout, **SEARCH)]  # noqa: E731
    else:
        search = lambda src: greedy_search(model, src, layout=layout, **SEARCH)  # noqa: E731
    if engine != "eager-packed":
        return search

    def packed(src: torch.Tensor) -> list:
        with packed_linears(model):
            return search(src)

    return packed


def measure(search: Callable[[torch.Tensor], list], sources: list[torch.Tensor], repeats: int) -> dict:
    """Sentences per CPU second over ``sources`` (batches), best of ``repeats``; the first call apart."""
    start = time.perf_counter()
    first = search(sources[0])
    first_s = time.perf_counter() - start
    rates, hyps = [], []
    for _ in range(repeats):
        cpu = time.process_time()
        hyps = [h for src in sources for h in search(src)]
        rates.append(sum(s.size(0) for s in sources) / (time.process_time() - cpu))
    assert all(len(h.tokens) == TOKENS for h in first), "every sentence decodes TOKENS tokens"
    return {"first_call_s": round(first_s, 2), "sentences_per_cpu_s": round(max(rates), 1), "hyps": hyps}


def same(a: list[Hypothesis], b: list[Hypothesis]) -> bool:
    return [h.tokens for h in a] == [h.tokens for h in b] and all(
        abs(x.log_prob - y.log_prob) <= 1e-4 for x, y in zip(a, b, strict=True)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="1,16,64", help="sentences per batch")
    p.add_argument("--beam", type=int, default=0, help="beam size (0: greedy)")
    p.add_argument("--engines", default=",".join(ENGINES), help=f"among {','.join(ENGINES)}")
    p.add_argument("--source-len", type=int, default=20)
    p.add_argument("--sentences", type=int, default=64, help="at least this many sentences a repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out")
    args = p.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if unknown := sorted(set(engines) - set(ENGINES)):
        p.error(f"--engines: unknown {unknown} (choose among {', '.join(ENGINES)})")
    torch.set_num_threads(1)
    model = bench_model()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    result: dict = {
        "command": "python -m bench.compiled_cpu " + " ".join(sys.argv[1:]),
        "machine": machine_info("cpu"),
        "commit": head.stdout.strip() or None,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "threads": 1,
        "beam": args.beam,
        "tokens_per_sentence": TOKENS,
        "levels": [],
    }
    g = torch.Generator().manual_seed(1)
    for B in (int(b) for b in args.batches.split(",")):
        n_batches = -(-args.sentences // B)
        sources = [torch.randint(4, 4000, (B, args.source_len), generator=g) for _ in range(n_batches)]
        reference, eager_rate, packed_rate = None, None, None
        for engine in engines:
            with torch.no_grad():
                level = measure(searcher(model, engine, args.beam), sources, args.repeats)
            hyps = level.pop("hyps")
            if engine == "eager":
                reference, eager_rate = hyps, level["sentences_per_cpu_s"]
            if engine == "eager-packed":
                packed_rate = level["sentences_per_cpu_s"]
            level = {"batch": B, "engine": engine, **level}
            if reference is not None and eager_rate:
                level["same_as_eager"] = same(hyps, reference)
                level["vs_eager"] = round(level["sentences_per_cpu_s"] / eager_rate, 2)
                if packed_rate:
                    level["vs_eager_packed"] = round(level["sentences_per_cpu_s"] / packed_rate, 2)
            result["levels"].append(level)
            print(json.dumps(level), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
