"""What one beam-search decoding step costs against the rows it carries: a fixed part and a part per row.

A server's step carries the few sentences in flight (x the beam); offline ``translate`` carries
hundreds of rows. For rows N in --rows, this times one cached step of the checkpoint's decoder
(``model.decode`` on one new position, a cache of --cache positions) and one step of the search
around it (log-probabilities and the ranking of ``rank_extensions``; not the cache reorder that
follows each real step), one torch thread, best of 5
repeats, with the weights packed as the server packs them, and fits time = fixed + per_row x N by
least squares. With --compile it also times ``torch.compile(model.decode, dynamic=True)`` against
eager on the same inputs, both with plain weights (compile cannot trace the packed products; compile
the first compiled call's time is reported apart), and checks the logits agree. --inductor sets
Inductor options for it: cpp_wrapper (a C++ wrapper calls the kernels, not Python) and freezing
(weights folded in as constants, which lets Inductor pack them for oneDNN itself).

    python -m bench.decode_step --checkpoint CKPT [--rows 4,8,16,32,64,128,256] [--compile]
        [--inductor cpp_wrapper,freezing] [--out F]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
import torch._inductor.config

from attnkit.decoding.beam import rank_extensions
from attnkit.decoding.common import step_log_probs
from attnkit.fast import packed_linears
from attnkit.tasks.translation import Translator


def best_ms(fn, iters: int, repeats: int = 5) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - start) / iters * 1e3)
    return min(times)


def fit(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def measure(model, rows: int, args, compiled) -> dict:
    """One level: a decoder state of ``rows`` rows (sentences x beam 4) with a filled cache, timed."""
    V, K = model.config.tgt_vocab_size, 4
    B = max(rows // K, 1)
    state = model.init_state(
        model.encode(torch.randint(4, model.config.src_vocab_size, (B, args.source_len)))
    )
    state.expand(K)
    model.decode(torch.randint(4, V, (B * K, args.cache)), state)  # fill the cache
    cache = [(kv.k, kv.v) for kv in state.self_kv]
    tokens, limits, scores = torch.randint(4, V, (B * K, 1)), torch.full((B * K,), 100), torch.zeros(B, K)

    def decode(fn=model.decode):
        for kv, (k, v) in zip(state.self_kv, cache):  # the same cache every time
            kv.k, kv.v = k, v
        return fn(tokens, state).logits

    def step():
        for kv, (k, v) in zip(state.self_kv, cache):
            kv.k, kv.v = k, v
        logp, _ = step_log_probs(model, tokens, state, step=3, limits=limits)
        return rank_extensions(scores, logp, K, model.config.eos_id)

    if compiled is None:  # the server's path: packed weights
        with packed_linears(model):
            return {
                "rows": B * K,
                "decode_ms": round(best_ms(decode, args.iters), 3),
                "search_step_ms": round(best_ms(step, args.iters), 3),
            }
    # torch.compile cannot trace the packed oneDNN products: both sides with plain weights
    start = time.perf_counter()
    first = decode(compiled)  # compiles on a new shape (dynamic shapes: mostly the first ones)
    compile_s = time.perf_counter() - start
    same = torch.allclose(first, decode(), atol=1e-4, rtol=1e-4)
    return {
        "rows": B * K,
        "plain_decode_ms": round(best_ms(decode, args.iters), 3),
        "compiled_decode_ms": round(best_ms(lambda: decode(compiled), args.iters), 3),
        "first_compiled_call_s": round(compile_s, 1),
        "compiled_same_logits": same,
    }


def inductor_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """Switch on the Inductor options named by --inductor (with --compile only); returns their names."""
    options = [o for o in args.inductor.split(",") if o]
    if options and not args.compile:
        p.error("--inductor needs --compile")
    for option in options:
        if option not in ("cpp_wrapper", "freezing"):
            p.error(f"--inductor: unknown option {option!r} (cpp_wrapper, freezing)")
        setattr(torch._inductor.config, option, True)
    return options


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--rows", default="4,8,16,32,64,128,256", help="decoder rows (sentences x beam 4)")
    p.add_argument("--cache", type=int, default=15, help="target positions already decoded")
    p.add_argument("--source-len", type=int, default=14)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--compile", action="store_true", help="also time torch.compile(model.decode)")
    p.add_argument(
        "--inductor", default="", help="with --compile: Inductor options to switch on (cpp_wrapper,freezing)"
    )
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Translator.from_checkpoint(args.checkpoint, device="cpu").model
    options = inductor_options(p, args)
    compiled = torch.compile(model.decode, dynamic=True) if args.compile else None
    result: dict = {"levels": []}
    with torch.no_grad():
        for rows in (int(r) for r in args.rows.split(",")):
            level = measure(model, rows, args, None)
            if compiled is not None:
                level.update(measure(model, rows, args, compiled))
            result["levels"].append(level)
            print(level, flush=True)
    xs = [lv["rows"] for lv in result["levels"]]
    for key in ("decode_ms", "search_step_ms", "plain_decode_ms", "compiled_decode_ms"):
        if key in result["levels"][0]:
            a, b = fit(xs, [lv[key] for lv in result["levels"]])
            result[f"{key}_fit"] = {"fixed_ms": round(a, 3), "per_row_us": round(1000 * b, 2)}
    result.update(
        checkpoint=args.checkpoint,
        inductor=options,
        cache=args.cache,
        source_len=args.source_len,
        threads=1,
        machine=f"{platform.processor() or platform.machine()}",
        torch=torch.__version__,
    )
    print(json.dumps({k: v for k, v in result.items() if k.endswith("_fit")}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
