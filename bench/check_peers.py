"""Smoke check of the benchmark peers: build each, count parameters, one train step, one decode.

    python -m bench.check_peers [--peers attnkit,torch,hf,joeynmt,opennmt,ct2] [--threads N]

Run from the repository root. Prints one line per peer and exits 0 when every peer that is
installed passed (a peer whose package is missing is reported as skipped); exit 1 if any installed
peer failed. "Passed" means: the parameter count of the reference model (OpenNMT-py's known
difference aside), a finite loss, exactly 30 tokens per sentence from greedy (and beam 4 where the
peer has it) with no EOS, and CTranslate2 float32 decoding the HF Marian weights as HF does.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

import torch

from . import peers
from .peers.common import BOS, EOS, PAD, VOCAB, PeerAdapter

# Parameters a peer has beyond the reference (its adapter's notes say why).
EXTRA_PARAMS = {"opennmt": 1_024 + 8_000}  # two final LayerNorms (pre-norm) + the generator's bias
N_TOKENS = 30


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


def check_decode(adapter: PeerAdapter, src: torch.Tensor, beam: int) -> tuple[torch.Tensor, float]:
    """Decode ``src``; RuntimeError unless it is exactly N_TOKENS tokens per sentence without EOS."""
    t0 = time.perf_counter()
    out = adapter.decode_fn(src, beam_size=beam, n_tokens=N_TOKENS)
    dt = time.perf_counter() - t0
    if tuple(out.shape) != (src.size(0), N_TOKENS):
        raise RuntimeError(f"beam {beam} decode returned {tuple(out.shape)}, not {(src.size(0), N_TOKENS)}")
    if bool((out == EOS).any()):
        raise RuntimeError(f"beam {beam}: EOS produced before {N_TOKENS} tokens")
    return out, dt


def check(key: str, adapter: PeerAdapter, expected_params: int, smoke, timing, args, seen: dict) -> str:
    """One peer's line; RuntimeError on the first check it fails. ``seen`` carries HF's model and output."""
    line = f"{adapter.name:24s} v{adapter.version:12s} params {adapter.n_params:>10,d}"
    if adapter.n_params != expected_params + EXTRA_PARAMS.get(key, 0):
        raise RuntimeError(f"{adapter.n_params:,} parameters, the reference model has {expected_params:,}")
    if adapter.train_step_fn is not None:
        loss = adapter.train_step_fn(*smoke)
        if not torch.isfinite(loss):
            raise RuntimeError(f"non-finite loss {loss}")
        line += f"  loss {float(loss):.3f}"
        if timing is not None:
            sec, _ = time_train_step(adapter, timing, args.repeats)
            line += f"  train step {args.timing_batch} {sec * 1000:7.1f} ms"
    if adapter.decode_fn is not None:
        out, dt = check_decode(adapter, smoke[0], beam=1)
        line += f"  greedy 8x{N_TOKENS} (cold) {dt * 1000:6.1f} ms"
        if key == "hf":
            seen["hf_greedy"] = out
        elif key == "ct2" and "hf_greedy" in seen:  # the same weights must give the same tokens
            same = float((out == seen["hf_greedy"]).float().mean())
            line += f"  same-as-HF {same:.0%}"
            if adapter.name.endswith("float32") and same < 0.9:
                raise RuntimeError(f"CTranslate2 float32 greedy matches HF on only {same:.0%}")
        if 4 in adapter.decode_beams:
            check_decode(adapter, smoke[0], beam=4)
    return line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default=",".join(peers.PEERS), help="comma list of " + ",".join(peers.PEERS))
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: leave)")
    ap.add_argument("--timing-batch", default="64x30", help="BxT of the timed train step (0 to skip)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")

    available = peers.available()
    expected_params = peers.build("attnkit", VOCAB, PAD, BOS, EOS).n_params  # the reference model
    smoke = random_batch(8, 20, 20)
    timing = None
    if args.timing_batch != "0":
        b, t = (int(x) for x in args.timing_batch.lower().split("x"))
        timing = random_batch(b, t, t, seed=1)
    failed, seen = [], {}
    for key in [k.strip() for k in args.peers.split(",") if k.strip()]:
        try:
            key = peers.resolve(key)
        except ValueError as e:
            print(e)
            failed.append(key)
            continue
        if key not in available:
            print(f"{key}: SKIPPED (package not installed)")
            continue
        for compute_type in ("float32", "int8") if key == "ct2" else (None,):
            label = key + (f"-{compute_type}" if compute_type else "")
            try:
                torch.manual_seed(0)
                if key == "ct2":  # on HF's weights when HF ran, so both must decode alike
                    kw = dict(compute_type=compute_type, marian_model=seen.get("hf_model"))
                    adapter = peers.build(key, VOCAB, PAD, BOS, EOS, **kw)
                else:
                    adapter = peers.build(key, VOCAB, PAD, BOS, EOS)
                if key == "hf":
                    seen["hf_model"] = adapter.model
                print(check(key, adapter, expected_params, smoke, timing, args, seen), flush=True)
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
