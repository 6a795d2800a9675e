"""``attnkit attention`` for language models (``TaskInfo.attention``): ``--out`` draws the causal
self-attention of every layer and head over the text."""

from __future__ import annotations


def run(args, state) -> None:
    from ...plotting import plot_attention
    from . import LanguageModel

    lm = LanguageModel.from_state(state, device=args.device, path=args.checkpoint)
    pieces, weights = lm.self_attention(args.text)  # (L, H, T, T)
    out = plot_attention(weights, pieces, pieces, args.out, title="language-model self-attention (causal)")
    print(f"wrote {out}")
