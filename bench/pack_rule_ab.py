"""A/B of attnkit.fast's packing rule: packed weights for decoding steps only (x (N, 1, D), the
rule on main) against packing every float32 input of two or more dimensions (the rule before the
server's memory fix), alternating in one process on the same Translator; best of the rounds.

    python -m bench.pack_rule_ab --checkpoint CKPT --sentences 256 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from attnkit import fast
from attnkit.data.multi30k import load_multi30k
from attnkit.translate import Translator


def pack_every_input(m: torch.nn.Linear):
    """The earlier rule: every float32 input of 2+ dimensions goes through the packed weight."""
    packed = torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), fast._TYPICAL_ROWS)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if (
            torch.is_grad_enabled()
            or x.dtype != torch.float32
            or x.dim() < 2
            or torch.is_autocast_enabled("cpu")
        ):
            return F.linear(x, m.weight, m.bias)
        return torch.ops.mkldnn._linear_pointwise(x, packed, m.bias, "none", [], "")

    return forward


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--sentences", type=int, default=256, help="first N test_2016_flickr sentences")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pair", default="de-en", help="the checkpoint's Multi30k direction (default de-en)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    tr = Translator.from_checkpoint(args.checkpoint, device="cpu")
    cfg = tr.model.config
    src_lang, tgt_lang = args.pair.split("-")
    pairs = load_multi30k("test_2016_flickr", src_lang, tgt_lang, args.data_dir, download=False)
    src = [s for s, _ in pairs[: args.sentences]]
    rules = {"steps only (main)": fast._packed_forward, "every input (before)": pack_every_input}
    times: dict[tuple[str, int], float] = {}
    texts: dict[tuple[str, int], list[str]] = {}
    try:
        for _ in range(args.rounds):
            for name, rule in rules.items():
                fast._packed_forward = rule
                for beam in (1, 4):
                    t = time.perf_counter()
                    out = tr.translate(src, beam=beam)
                    dt = time.perf_counter() - t
                    times[name, beam] = min(dt, times.get((name, beam), float("inf")))
                    texts[name, beam] = [o.text for o in out]
    finally:
        fast._packed_forward = rules["steps only (main)"]
    a, b = rules
    print(f"{args.checkpoint}: d_model {cfg.d_model}, {len(src)} sentences, best of {args.rounds}")
    for beam in (1, 4):
        same = sum(x == y for x, y in zip(texts[a, beam], texts[b, beam]))
        print(
            f"beam {beam}: {a} {times[a, beam]:.3f} s, {b} {times[b, beam]:.3f} s, "
            f"speed {a} / {b} = {times[b, beam] / times[a, beam]:.3f}x; identical {same}/{len(src)}"
        )


if __name__ == "__main__":
    main()
