"""Which attention heads matter: a gate on every head's output (Michel, Levy and Neubig, 2019).

Each head h of a multi-head attention gets a gate xi_h that multiplies its output before W^O
(:attr:`~attnkit.attention.MultiHeadAttention.head_gate`): 1 is the model as trained, 0 masks the
head. A head's *gradient importance* is I_h = E |dL/dxi_h| at xi = 1, the loss being the task's own
on held-out data; Michel et al.'s code accumulates it batch by batch, as :func:`gradient_importance`
does (per target token here, so the figure does not grow with the data). Beside it, what a head's
weights look like: its *confidence* (the mean of each query's largest weight; Voita et al., 2019)
and its *entropy* (nats; log of the keys it spreads over).

Kinds: "encoder" (an encoder's self-attention), "decoder" (a decoder's or a language model's
causal self-attention), "cross" (a decoder's attention over a sentence or an image's regions).

Legend: L layers of a kind, H heads, B batch, Tq queries, Tk keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .errors import ConfigError
from .loss import LossOutput

KINDS = ("encoder", "decoder", "cross")


def attention_heads(model: nn.Module) -> dict[str, list[MultiHeadAttention]]:
    """Every multi-head attention of ``model`` by kind, in layer order; kinds without any left out.
    A model without one (the RNN's single additive attention) is a ConfigError."""
    found: dict[str, list[MultiHeadAttention]] = {kind: [] for kind in KINDS}
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            kind = (
                "cross"
                if name.endswith("cross_attn")
                else "encoder"
                if name.startswith("encoder.")
                else "decoder"
            )
            found[kind].append(module)
    found = {kind: modules for kind, modules in found.items() if modules}
    if not found:
        raise ConfigError(
            f"a {type(model).__name__} has no multi-head attention to score (the RNN's additive "
            "attention is one head)"
        )
    return found


def shapes(model: nn.Module) -> dict[str, tuple[int, int]]:
    """(L, H) of each kind: H the most heads a layer has (a pruned layer has fewer: :func:`counts`)."""
    return {kind: (len(ms), max(m.n_heads for m in ms)) for kind, ms in attention_heads(model).items()}


def counts(model: nn.Module) -> dict[str, list[int]]:
    """The heads of each layer, per kind."""
    return {kind: [m.n_heads for m in ms] for kind, ms in attention_heads(model).items()}


@contextlib.contextmanager
def gated(model: nn.Module, gates: dict[str, Tensor]) -> Iterator[None]:
    """Inside the block, head h of layer l of each kind in ``gates`` is scaled by gates[kind][l, h]
    (L, H); kinds left out stay as trained."""
    heads = attention_heads(model)
    try:
        for kind, values in gates.items():
            for layer, module in enumerate(heads[kind]):
                module.head_gate = values[layer, : module.n_heads]  # (H,) of this layer
        yield
    finally:
        for modules in heads.values():
            for module in modules:
                module.head_gate = None


def masked(model: nn.Module, kind: str, layer: int, head: int) -> dict[str, Tensor]:
    """Gates that mask one head and keep every other."""
    L, H = shapes(model)[kind]
    gates = torch.ones(L, H)
    gates[layer, head] = 0.0
    return {kind: gates}


def gradient_importance(
    model: nn.Module,
    batches: Iterable[Any],
    loss_of: Callable[[Any], LossOutput],
    at: dict[str, Tensor] | None = None,
) -> dict[str, Tensor]:
    """I_h per kind (L, H): |dL/dxi_h| at xi = 1 (or at the gates ``at``: heads already masked),
    summed batch by batch, per target token; ``loss_of(batch)`` is the task's summed loss of a
    batch. The weights get no gradient."""
    gates = {
        kind: (at[kind].clone() if at is not None and kind in at else torch.ones(L, H)).requires_grad_()
        for kind, (L, H) in shapes(model).items()
    }
    total = {kind: torch.zeros(L, H, dtype=torch.float64) for kind, (L, H) in shapes(model).items()}
    tokens = 0
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        with gated(model, gates):
            for batch in batches:
                out = loss_of(batch)
                out.loss.backward()
                for kind, g in gates.items():
                    assert g.grad is not None
                    total[kind] += g.grad.abs().double()
                    g.grad = None
                tokens += int(out.n_tokens)
    finally:
        for p in params:
            p.requires_grad_(True)
    return {kind: (t / max(tokens, 1)).float() for kind, t in total.items()}


@contextlib.contextmanager
def weight_statistics(model: nn.Module) -> Iterator[dict[str, dict[str, Tensor]]]:
    """Inside the block every attention reports its weights; on leaving, the dict yielded holds, per
    kind, (L, H) each: ``confidence`` (mean largest weight of a query) and ``entropy`` (mean entropy of
    a query's weights, nats) over every query computed inside (the gradient pass's, say: one pass)."""
    heads = attention_heads(model)
    H = {kind: H for kind, (_, H) in shapes(model).items()}
    sums = {k: torch.zeros(2, len(ms), H[k], dtype=torch.float64) for k, ms in heads.items()}  # (2, L, H)
    rows = {k: torch.zeros(len(ms), dtype=torch.float64) for k, ms in heads.items()}  # (L,)

    def hook(kind: str, layer: int) -> Callable[[Tensor], None]:
        def add(w: Tensor) -> None:  # (B, H', Tq, Tk): reduced at once, never kept
            w = w.float()
            n = w.size(1)
            sums[kind][0, layer, :n] += w.amax(-1).sum((0, 2)).double().cpu()
            entropy = -(w * w.clamp_min(1e-12).log()).sum(-1)  # (B, H', Tq)
            sums[kind][1, layer, :n] += entropy.sum((0, 2)).double().cpu()
            rows[kind][layer] += w.size(0) * w.size(2)

        return add

    found: dict[str, dict[str, Tensor]] = {}
    try:
        for kind, modules in heads.items():
            for layer, module in enumerate(modules):
                module.weights_hook = hook(kind, layer)
        yield found
    finally:
        for modules in heads.values():
            for module in modules:
                module.weights_hook = None
    for kind, (confidence, entropy) in sums.items():
        per_row = rows[kind].clamp_min(1)[:, None]
        found[kind] = {"confidence": (confidence / per_row).float(), "entropy": (entropy / per_row).float()}


def head_scores(
    model: nn.Module, batches: Sequence[Any], loss_of: Callable[[Any], LossOutput], *, importance: bool = True
) -> dict[str, dict[str, Tensor]]:
    """Per kind, (L, H) each: ``importance`` (:func:`gradient_importance`; left out with
    ``importance=False``, for a model that cannot be differentiated), ``confidence`` and ``entropy``
    (:func:`weight_statistics`), all from one pass over ``batches``."""
    with weight_statistics(model) as stats:  # filled from the gradient pass's own forwards
        if importance:
            found = gradient_importance(model, batches, loss_of)
        else:
            with torch.no_grad():
                for batch in batches:
                    loss_of(batch)
    return {kind: ({"importance": found[kind]} if importance else {}) | stats[kind] for kind in stats}


def prune_heads(model: nn.Module, removed: dict[str, list[list[int]]]) -> None:
    """Remove heads for good: ``removed[kind][layer]`` are the heads of that layer to drop (as
    ``model.pruned_heads`` stores them); the model then computes what it computed with those gates
    at 0. A layer keeps at least one head."""
    heads = attention_heads(model)
    for kind, layers in removed.items():
        if kind not in heads or len(layers) != len(heads[kind]):
            found = len(heads.get(kind, []))
            raise ConfigError(f"pruned_heads: {kind} lists {len(layers)} layers; the model has {found}")
        for module, gone in zip(heads[kind], layers, strict=True):
            if gone:
                prune_attention(module, gone)


def removed_heads(model: nn.Module, gates: dict[str, Tensor]) -> dict[str, list[list[int]]]:
    """The heads whose gate is 0, per kind and layer: what :func:`prune_heads` removes."""
    n = counts(model)
    return {
        kind: [[h for h in range(n[kind][layer]) if values[layer, h] == 0] for layer in range(values.size(0))]
        for kind, values in gates.items()
        if bool((values == 0).any())
    }


def prune_attention(module: MultiHeadAttention, heads: Sequence[int]) -> None:
    """Remove ``heads`` of one attention for good: their rows of W^Q, W^K and W^V and their columns of
    W^O, so it computes what it computed with those heads' gates at 0, with fewer weights."""
    gone = set(heads)
    keep = [h for h in range(module.n_heads) if h not in gone]
    if not keep:
        raise ConfigError("pruning would leave an attention without a head: keep at least one per layer")
    Dh, inner = module.d_head, module.n_heads * module.d_head
    rows = torch.cat([torch.arange(h * Dh, (h + 1) * Dh) for h in keep])  # (H' * Dh,)
    module.q_proj = _rows(module.q_proj, rows)
    module.kv_proj = _rows(module.kv_proj, torch.cat([rows, inner + rows]))  # [W^K; W^V]
    out = module.out_proj
    pruned = nn.Linear(len(rows), out.out_features, bias=out.bias is not None).to(out.weight)
    with torch.no_grad():
        pruned.weight.copy_(out.weight[:, rows])
        if out.bias is not None:
            pruned.bias.copy_(out.bias)
    module.out_proj, module.n_heads = pruned, len(keep)


def _rows(linear: nn.Linear, rows: Tensor) -> nn.Linear:
    """A linear layer keeping only output ``rows`` of ``linear``."""
    kept = nn.Linear(linear.in_features, len(rows), bias=linear.bias is not None).to(linear.weight)
    with torch.no_grad():
        kept.weight.copy_(linear.weight[rows])
        if linear.bias is not None:
            kept.bias.copy_(linear.bias[rows])
    return kept
