"""Smoke check of the benchmark peers: build each, count parameters, one train step, one decode.

    python bench/check_peers.py [--peers torch,transformers,...] [--threads N]

Prints one line per peer and exits 0 when every peer that is installed passed (a peer whose
package is missing is reported as skipped). Exit 1 if any installed peer failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

VOCAB, PAD, BOS, EOS = 8000, 0, 1, 2


def random_batch(batch: int, src_len: int, tgt_len: int, seed: int = 0):
    """Random tokens (ids >= 3), ragged lengths padded at the end; tgt_in = bos + y, tgt_out = y + eos."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, src_len), generator=g)
    y = torch.randint(3, VOCAB, (batch, tgt_len - 1), generator=g)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), y], dim=1)
    tgt_out = torch.cat([y, torch.full((batch, 1), EOS)], dim=1)
    for b in range(batch):  # ragged lengths: every other sentence is shorter
        if b % 2:
            s, t = src_len - 3, tgt_len - 4
            src[b, s:] = PAD
            tgt_out[b, t - 1] = EOS
            tgt_out[b, t:] = PAD
            tgt_in[b, t:] = PAD
    return src, tgt_in, tgt_out


def time_train_step(adapter, batch, repeats: int) -> float:
    src, tgt_in, tgt_out = batch
    opt = torch.optim.Adam(adapter.parameters(), lr=1e-4)
    adapter.train_step_fn(src, tgt_in, tgt_out)  # warm-up
    opt.step()
    opt.zero_grad(set_to_none=True)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        loss = adapter.train_step_fn(src, tgt_in, tgt_out)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    if not torch.isfinite(loss):
        raise RuntimeError(f"non-finite loss {loss}")
    return min(times), float(loss)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--peers", default=",".join(peers.BUILDERS), help="comma list of " + ",".join(peers.BUILDERS)
    )
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: leave)")
    ap.add_argument("--timing-batch", default="64x30", help="BxT of the timed train step (0 to skip)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")

    available = peers.available_builders()
    smoke = random_batch(8, 20, 20)
    timing = None
    if args.timing_batch != "0":
        b, t = (int(x) for x in args.timing_batch.lower().split("x"))
        timing = random_batch(b, t, t, seed=1)
    failed = []
    hf_model = None
    hf_greedy = None
    for key in [k.strip() for k in args.peers.split(",") if k.strip()]:
        if key not in peers.BUILDERS:
            print(f"{key}: unknown peer")
            failed.append(key)
            continue
        if key not in available:
            print(f"{key}: SKIPPED (package not installed)")
            continue
        variants = [("float32",), ("int8",)] if key == "ctranslate2" else [()]
        for variant in variants:
            label = key + (f"-{variant[0]}" if variant else "")
            try:
                torch.manual_seed(0)
                if key == "ctranslate2":
                    adapter = peers.build_ctranslate2(
                        VOCAB, PAD, BOS, EOS, compute_type=variant[0], marian_model=hf_model
                    )
                else:
                    adapter = peers.BUILDERS[key](VOCAB, PAD, BOS, EOS)
                if key == "transformers":
                    hf_model = adapter.model
                line = f"{label:24s} v{adapter.version:12s} params {adapter.n_params:>10,d}"
                if adapter.train_step_fn is not None:
                    loss = adapter.train_step_fn(*smoke)
                    if not torch.isfinite(loss):
                        raise RuntimeError(f"non-finite loss {loss}")
                    line += f"  loss {float(loss):.3f}"
                    if timing is not None:
                        sec, _ = time_train_step(adapter, timing, args.repeats)
                        line += f"  train step {args.timing_batch} {sec * 1000:7.1f} ms"
                if adapter.decode_fn is not None:
                    src = smoke[0]
                    t0 = time.perf_counter()
                    out = adapter.decode_fn(src, beam_size=1, n_tokens=30)
                    dt = time.perf_counter() - t0
                    if tuple(out.shape) != (src.size(0), 30):
                        raise RuntimeError(f"greedy decode returned shape {tuple(out.shape)}")
                    if bool((out == EOS).any()):
                        raise RuntimeError("EOS produced before n_tokens")
                    line += f"  greedy 8x30 (cold) {dt * 1000:6.1f} ms"
                    if key == "transformers":
                        hf_greedy = out
                    elif key == "ctranslate2" and hf_greedy is not None:
                        same = float((out == hf_greedy).float().mean())
                        line += f"  same-as-HF {same:.0%}"
                        if variant[0] == "float32" and same < 0.9:
                            raise RuntimeError(f"CTranslate2 float32 greedy matches HF on only {same:.0%}")
                    if 4 in adapter.decode_beams:
                        out4 = adapter.decode_fn(src, beam_size=4, n_tokens=30)
                        if tuple(out4.shape) != (src.size(0), 30):
                            raise RuntimeError(f"beam decode returned shape {tuple(out4.shape)}")
                print(line, flush=True)
            except Exception:  # report and go on with the next peer
                print(f"{label}: FAILED")
                traceback.print_exc()
                failed.append(label)
    if failed:
        print("failed:", ", ".join(failed))
        return 1
    print("all installed peers OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
