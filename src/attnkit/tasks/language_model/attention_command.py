"""``attnkit attention`` for language models: ``--out`` draws the causal
self-attention of every layer and head over the text; ``--method rollout`` or ``flow`` one map of
what each position read of the input pieces through every layer (:mod:`attnkit.attention.rollout`)."""

from __future__ import annotations

from ...plugin.flags import METHOD_FLAG


def add_flags(add) -> None:
    add("--text", required=True, help="the input text")
    add("--method", **METHOD_FLAG)


def run(args, state) -> None:
    from ...attention.rollout import mixing
    from ...plotting import plot_attention
    from . import LanguageModel

    lm = LanguageModel.from_state(state, device=args.device, path=args.checkpoint)
    pieces, weights = lm.self_attention(args.text)  # (L, H, T, T)
    title = "language-model self-attention (causal)"
    if args.method != "raw":
        weights, title = mixing(weights, args.method), f"language-model self-attention ({args.method})"
    out = plot_attention(weights, pieces, pieces, args.out, title=title)
    print(f"wrote {out}")
