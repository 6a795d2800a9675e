"""Today's eager search against the fixed-layout step (attnkit.decoding.static), eager and compiled.

The model is the main job's size with random weights (d_model 128, 4 heads, d_ff 512, 2+2 layers,
vocabulary 4000); eos is banned for 30 tokens and then forced (min_len 30, a length limit of 31),
so every sentence decodes 30 tokens and eos: 31 steps. One torch thread. For every batch size and
engine it decodes batches of random sources (--source-len tokens) and reports sentences per CPU
second (best of --repeats; each repeat decodes at least --sentences sentences), the first call's
time (a compiled engine compiles there: one graph per batch size) and whether the tokens equal
the eager search's. Engines:

- eager: ``greedy_search`` / ``beam_search``, as the Translator runs today (without packed weights);
- static: the static step, eager;
- inductor, inductor-cpp, inductor-freeze, inductor-cpp-freeze: the static step through
  ``torch.compile(step, fullgraph=True)`` with Inductor, plain, with ``cpp_wrapper`` (C++ calls the
  kernels), with ``freezing`` (weights folded in as constants, so Inductor can pack them), or both.

    python -m bench.static_step [--batches 1,16,64] [--beam 0] [--engines eager,static,inductor,...]
        [--repeats 3] [--sentences 64] [--out F]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import torch

from attnkit.decoding import beam_search, greedy_search
from attnkit.decoding.common import Hypothesis
from attnkit.decoding.static import StaticDecoder
from attnkit.model import Transformer, TransformerConfig

TOKENS = 30  # tokens before eos in every sentence
INDUCTOR = {
    "inductor": {},
    "inductor-cpp": {"cpp_wrapper": True},
    "inductor-freeze": {"freezing": True},
    "inductor-cpp-freeze": {"cpp_wrapper": True, "freezing": True},
}
ENGINES = ("eager", "static", *INDUCTOR)
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
    if engine == "eager":
        if beam:
            return lambda src: [h[0] for h in beam_search(model, src, beam_size=beam, **SEARCH)]
        return lambda src: greedy_search(model, src, **SEARCH)
    decoder = StaticDecoder(model, min_len=TOKENS)
    if engine in INDUCTOR:
        torch._dynamo.reset()  # each engine compiles from scratch: its first call is its compile time
        decoder.compile(options=INDUCTOR[engine])
    lengths = dict(max_len_a=SEARCH["max_len_a"], max_len_b=SEARCH["max_len_b"])
    if beam:
        return lambda src: [h[0] for h in decoder.beam(src, beam_size=beam, **lengths)]
    return lambda src: decoder.greedy(src, **lengths)


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
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        p.error(f"--engines: unknown {unknown} (choose among {', '.join(ENGINES)})")
    torch.set_num_threads(1)
    model = bench_model()
    result: dict = {
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": 1,
        "beam": args.beam,
        "tokens_per_sentence": TOKENS,
        "levels": [],
    }
    g = torch.Generator().manual_seed(1)
    for B in (int(b) for b in args.batches.split(",")):
        n_batches = -(-args.sentences // B)
        sources = [torch.randint(4, 4000, (B, args.source_len), generator=g) for _ in range(n_batches)]
        reference = None
        for engine in engines:
            with torch.no_grad():
                level = measure(searcher(model, engine, args.beam), sources, args.repeats)
            hyps = level.pop("hyps")
            if reference is None and engine == "eager":
                reference = hyps
            level = {"batch": B, "engine": engine, **level}
            if reference is not None:
                level["same_as_eager"] = same(hyps, reference)
            result["levels"].append(level)
            print(json.dumps(level), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
